import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isBusy } from './devws-node.ts';

describe('devws-node', () => {
  it('is busy while anything is under ~/.krt/activity', () => {
    const home = mkdtempSync(join(tmpdir(), 'devws-node-'));
    assert.equal(isBusy(home), false);
    mkdirSync(join(home, '.krt', 'activity', 'session-1'), { recursive: true });
    assert.equal(isBusy(home), true);
  });
});
