import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PackageLockError, productionPackages, resolveLockPackage, type PackageLock } from './npm-production.ts';
import { REPO_ROOT } from './paths.ts';

const lock: PackageLock = {
  lockfileVersion: 3,
  packages: {
    '': { dependencies: { a: '1' } },
    'node_modules/a': { dependencies: { b: '1' } },
    'node_modules/a/node_modules/b': {},
    'node_modules/b': { dev: true },
    'node_modules/@s/c': {},
    'node_modules/lint': { dev: true, dependencies: { b: '1' } },
    'node_modules/tsx': { dev: true, dependencies: { esbuild: '1' }, optionalDependencies: { fsevents: '1' } },
    'node_modules/esbuild': { dev: true, optionalDependencies: { '@esbuild/linux-x64': '1' } },
    'node_modules/@esbuild/linux-x64': { dev: true },
    'node_modules/fsevents': { dev: true },
    'node_modules/devonly/node_modules/p': {},
  },
};

describe('production node_modules from package-lock.json', () => {
  it('resolves a dependency the way Node does: nearest node_modules first', () => {
    assert.equal(resolveLockPackage(lock.packages!, 'node_modules/a', 'b'), 'node_modules/a/node_modules/b');
    assert.equal(resolveLockPackage(lock.packages!, 'node_modules/lint', 'b'), 'node_modules/b');
    assert.equal(resolveLockPackage(lock.packages!, '', 'missing'), undefined);
  });

  it('keeps what is not dev, drops dev tooling, adds the extras with their closure', () => {
    assert.deepEqual(productionPackages(lock, ['tsx']), [
      'node_modules/@esbuild/linux-x64',
      'node_modules/@s/c',
      'node_modules/a',
      'node_modules/devonly/node_modules/p',
      'node_modules/esbuild',
      'node_modules/fsevents',
      'node_modules/tsx',
    ]);
    assert.ok(!productionPackages(lock).includes('node_modules/lint'));
    assert.ok(!productionPackages(lock).includes('node_modules/b'));
  });

  it('refuses a lock it cannot read faithfully', () => {
    assert.throws(() => productionPackages({ lockfileVersion: 1 }), PackageLockError);
    assert.throws(() => productionPackages(lock, ['nope']), /nope is not installed/);
    const linked = { lockfileVersion: 3, packages: { 'node_modules/w': { link: true } } };
    assert.throws(() => productionPackages(linked), /linked package/);
  });

  it("selects from the repository's lock the runtime dependencies and tsx, without the dev tools", () => {
    const repo = JSON.parse(readFileSync(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as PackageLock;
    const keys = productionPackages(repo, ['tsx']);
    for (const k of ['node_modules/@kubernetes/client-node', 'node_modules/pino', 'node_modules/tsx'])
      assert.ok(keys.includes(k), k);
    for (const k of ['node_modules/mocha', 'node_modules/eslint', 'node_modules/playwright-core'])
      assert.ok(!keys.includes(k), k);
  });
});
