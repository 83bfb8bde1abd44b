import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { EXTRA_DIRS_ENV, FUNCTIONS_DIR, functionDirs, loadFunctions } from './functions.ts';

const ROOT = resolve(FUNCTIONS_DIR, '..');
const SAMPLES = ['sample-echo', 'sample-policy', 'sample-sweep'];

describe('function discovery', () => {
  it('production is functions/ only: no sample function is loaded or rendered', async () => {
    const names = (await loadFunctions(functionDirs({}))).map((f) => f.name);
    assert.ok(names.includes('run-scheduler'));
    for (const s of SAMPLES) assert.ok(!names.includes(s), `${s} is not a production function`);
    const rendered = readFileSync(join(ROOT, 'kustomize', 'base', 'generated', 'functions.yaml'), 'utf8');
    assert.doesNotMatch(rendered, /sample-|kruntimes\.io\/sample/);
  });

  it('the e2e fixtures add the sample functions from an extra directory', async () => {
    const dirs = functionDirs({ [EXTRA_DIRS_ENV]: 'e2e/fixtures/functions' });
    assert.deepEqual(dirs, [FUNCTIONS_DIR, join(ROOT, 'e2e', 'fixtures', 'functions')]);
    const names = (await loadFunctions(dirs)).map((f) => f.name);
    for (const s of SAMPLES) assert.ok(names.includes(s));
  });

  it('refuses a missing extra directory and a function defined twice', async () => {
    await assert.rejects(loadFunctions(functionDirs({ [EXTRA_DIRS_ENV]: 'no/such/dir' })), /does not exist/);
    await assert.rejects(loadFunctions([FUNCTIONS_DIR, FUNCTIONS_DIR]), /defined twice/);
  });
});
