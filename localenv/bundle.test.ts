import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { buildBundle, functionEntries } from './bundle.ts';
import { REPO_ROOT } from './paths.ts';

/** Files the bundled modules open beside themselves: new URL('./x', import.meta.url). */
function besideFiles(): string[] {
  const files = execFileSync('git', ['ls-files', 'cmd', 'runtimed', 'lib', 'apiserver'], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
  })
    .split('\n')
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'));
  const out: string[] = [];
  for (const f of files)
    for (const m of readFileSync(join(REPO_ROOT, f), 'utf8').matchAll(/new URL\('\.\/([^']+)', import\.meta\.url\)/g))
      out.push(m[1] ?? '');
  return out;
}

describe('per-Pod components bundle', function () {
  this.timeout(60_000);
  it('builds an entry that runs, with every file its modules open beside themselves', async () => {
    // Inside the checkout (ignored), so the bundle resolves its external npm packages.
    mkdirSync(join(REPO_ROOT, '.kruntimes'), { recursive: true });
    const dir = mkdtempSync(join(REPO_ROOT, '.kruntimes', 'bundle-test-'));
    try {
      await buildBundle(dir);
      const beside = besideFiles();
      assert.ok(beside.includes('function-worker.py') && beside.includes('pty-bridge.py'), beside.join(','));
      for (const f of beside) assert.ok(existsSync(join(dir, f)), `${f} beside the bundle`);
      const out = execFileSync(process.execPath, [join(dir, 'kruntimes.mjs'), 'version'], { encoding: 'utf8' });
      assert.match(out, /^kruntimes \d/);
      // Every function (and the e2e suite's samples) loads from the bundle, without tsx.
      const env = { ...process.env, KRT_EXTRA_FUNCTION_DIRS: 'e2e/fixtures/functions', NODE_OPTIONS: '' };
      const listed = execFileSync(process.execPath, [join(dir, 'kruntimes.mjs'), 'fn', 'list'], {
        encoding: 'utf8',
        env,
      });
      const names = listed
        .trim()
        .split('\n')
        .map((l) => l.split(' ')[0]);
      const expected = Object.keys(functionEntries()).map((k) => k.split('/').at(-2));
      assert.ok(expected.includes('run-scheduler') && expected.includes('sample-echo'), expected.join(','));
      assert.deepEqual([...names].sort(), [...expected].sort());
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
