import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { OUT, render, specPath } from './gen.ts';

describe('opensandbox generated types', () => {
  it('are up to date with the vendored lifecycle spec (gen.ts --check)', async function () {
    assert.ok(existsSync(specPath()), `the vendored spec ${specPath()} is part of the repository`);
    this.timeout(30_000);
    assert.equal(readFileSync(OUT, 'utf8'), await render(specPath()), 'run npx tsx lib/opensandbox/gen.ts');
  });
});
