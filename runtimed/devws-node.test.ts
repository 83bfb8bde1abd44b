import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { isBusy, runNodeAgent, type NodeConfig } from './devws-node.ts';

describe('devws-node', () => {
  it('is busy while anything is under ~/.krt/activity', () => {
    const home = mkdtempSync(join(tmpdir(), 'devws-node-'));
    assert.equal(isBusy(home), false);
    mkdirSync(join(home, '.krt', 'activity', 'session-1'), { recursive: true });
    assert.equal(isBusy(home), true);
  });

  it('stops at once when aborted (SIGTERM), without waiting out the poll interval', async () => {
    const stop = new AbortController();
    let ticks = 0;
    const agent = {
      tick: (): Promise<'none'> => {
        ticks++;
        // SIGTERM arrives during the first round; the next wait is an hour long.
        stop.abort();
        return Promise.resolve('none');
      },
    };
    const cfg: NodeConfig = {
      namespace: 'ns',
      workspace: 'w',
      self: { nodeId: 'n', incarnation: 'i', sandboxId: 's', generation: 1 },
      home: '/nonexistent',
      pollMs: 3_600_000,
    };
    // Without the abortable wait this never resolves (the test times out).
    await runNodeAgent(agent, cfg, pino({ level: 'silent' }), stop.signal);
    assert.equal(ticks, 1);
  });
});
