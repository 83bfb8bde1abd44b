import assert from 'node:assert/strict';
import { constants } from 'node:fs';
import { mkdir, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { closeFd, drive, listAtMost, op, SYNC_BUDGET, SYNC_WRITE_BYTES, type FsOp, type FsTrace } from './fs-ops.ts';
import { isUnsafePathError, openDirBeneathWalk, removeBeneathWalk, type DirHandle } from './safe-dir.ts';
import { makeTmp } from './test-support.ts';

/** Records how each operation ran. */
function recorder(): { trace: FsTrace; sync: FsOp['op'][]; pooled: FsOp['op'][] } {
  const sync: FsOp['op'][] = [];
  const pooled: FsOp['op'][] = [];
  return { trace: (o, s) => (s ? sync : pooled).push(o.op), sync, pooled };
}

/** A workspace root beside a directory nothing may touch. */
async function setup(): Promise<{ base: string; root: string; outside: string }> {
  const base = await makeTmp('fs-ops');
  const root = join(base, 'workspace');
  const outside = join(base, 'outside');
  await mkdir(root);
  await mkdir(outside);
  await writeFile(join(outside, 'keep'), 'keep');
  return { base, root, outside };
}

/** dir/d0..d<dirs-1>, each with `files` files, a link to `outside` and a link inside each. */
async function tree(dir: string, dirs: number, files: number, outside: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  await symlink(outside, join(dir, 'to-outside'));
  for (let d = 0; d < dirs; d++) {
    await mkdir(join(dir, `d${d}`));
    await symlink(outside, join(dir, `d${d}`, 'link'));
    for (let f = 0; f < files; f++) await writeFile(join(dir, `d${d}`, `f${f}`), 'x');
  }
}

describe('runtimed/artifacts fs-ops (a Run directory’s file-system work without the thread pool)', () => {
  it('creates, writes and removes a small Run directory with synchronous calls, only rmdir through the thread pool', async () => {
    const { base, root } = await setup();
    const r = recorder();
    const dir = (await drive(openDirBeneathWalk(root, ['uid'], { create: 0o775 }), SYNC_BUDGET, r.trace)) as DirHandle;
    const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW;
    closeFd(await drive(op.open(`${dir.path}/script`, flags, 0o600), SYNC_BUDGET, r.trace));
    await dir.close();
    await drive(removeBeneathWalk(root, ['uid']), SYNC_BUDGET, r.trace);
    assert.deepEqual(await readdir(root), []);
    assert.deepEqual(r.sync, [
      'open',
      'fstat',
      'mkdir',
      'open',
      'fstat',
      'open',
      'open',
      'fstat',
      'lstat',
      'open',
      'fstat',
      'readdir',
      'unlink',
    ]);
    assert.deepEqual(r.pooled, ['rmdir']);
    await rm(base, { recursive: true, force: true });
  });

  it('removes a tree larger than the budget all the same: the budget synchronously, the rest through the thread pool', async () => {
    const { base, root, outside } = await setup();
    await tree(join(root, 'uid'), 6, 30, outside);
    const r = recorder();
    await drive(removeBeneathWalk(root, ['uid']), 16, r.trace);
    assert.deepEqual(await readdir(root), []);
    assert.deepEqual(await readFile(join(outside, 'keep'), 'utf8'), 'keep');
    assert.ok(r.sync.length <= 16, `${r.sync.length} synchronous calls`);
    assert.ok(r.pooled.filter((o) => o !== 'rmdir').length > 100, 'the rest went through the thread pool');
    await rm(base, { recursive: true, force: true });
  });

  it('lists a directory longer than what is left of the budget through the thread pool, and everything after it', async () => {
    const { base, root, outside } = await setup();
    await tree(join(root, 'uid'), 1, 40, outside);
    const r = recorder();
    await drive(removeBeneathWalk(root, ['uid']), 20, r.trace);
    assert.deepEqual(await readdir(root), []);
    assert.ok(r.pooled.includes('readdir'), 'the 41-entry listing was not read on the event loop');
    assert.ok(!r.sync.includes('unlink'), 'nothing after it ran synchronously');
    await rm(base, { recursive: true, force: true });
  });

  it('gives the same result with every budget: the target gone, links removed and never followed', async () => {
    for (const budget of [0, 1, 2, 3, 5, 8, 13, 21, 34, SYNC_BUDGET, 10_000]) {
      const { base, root, outside } = await setup();
      await tree(join(root, 'uid', 'nested'), 3, 4, outside);
      await mkdir(join(root, 'other'));
      await drive(removeBeneathWalk(root, ['uid']), budget);
      assert.deepEqual(await readdir(root), ['other'], `budget ${budget}`);
      assert.deepEqual(await readdir(outside), ['keep'], `budget ${budget}`);
      await rm(base, { recursive: true, force: true });
    }
  });

  it('throws a refusal into the walk as the asynchronous path does (a link on the way)', async () => {
    for (const budget of [0, SYNC_BUDGET]) {
      const { base, root, outside } = await setup();
      await symlink(outside, join(root, 'uid'));
      await assert.rejects(drive(openDirBeneathWalk(root, ['uid', 'outputs'], { create: 0o775 }), budget), (err) => {
        assert.ok(isUnsafePathError(err));
        assert.match(err.message, /is a symbolic link/);
        return true;
      });
      assert.deepEqual(await readdir(outside), ['keep']);
      await rm(base, { recursive: true, force: true });
    }
  });

  it('writes a large file through the thread pool, a small one synchronously', async () => {
    const { base, root } = await setup();
    for (const size of [10, SYNC_WRITE_BYTES + 1]) {
      const r = recorder();
      const fd = await drive(op.open(join(root, `f${size}`), constants.O_WRONLY | constants.O_CREAT, 0o600));
      try {
        await drive(op.write(fd, Buffer.alloc(size, 'a')), SYNC_BUDGET, r.trace);
      } finally {
        closeFd(fd);
      }
      assert.equal((await readFile(join(root, `f${size}`))).length, size);
      assert.deepEqual(size > SYNC_WRITE_BYTES ? r.pooled : r.sync, ['write']);
    }
    await rm(base, { recursive: true, force: true });
  });

  it('listAtMost: the entries up to the limit, undefined past it', async () => {
    const { base, outside } = await setup();
    for (let i = 0; i < 4; i++) await writeFile(join(outside, `n${i}`), '');
    assert.equal(listAtMost(outside, 5)?.length, 5);
    assert.equal(listAtMost(outside, 4), undefined);
    await rm(base, { recursive: true, force: true });
  });
});
