import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { lstatSync, statSync } from 'node:fs';
import { lstat, mkdir, readFile, readdir, readlink, realpath, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import {
  MAX_DIR_DEPTH,
  isUnsafePathError,
  openDirBeneath,
  PinnedDir,
  removeBeneath,
  withDirBeneath,
  UNSAFE_PATH,
} from './safe-dir.ts';
import { makeTmp } from './test-support.ts';
import { walkTree } from './walk.ts';

/** rel path → 'dir', 'file <content>' or 'link <target>' (links are never followed). */
async function readTree(root: string, rel = ''): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of (await readdir(join(root, rel))).sort()) {
    const path = rel ? `${rel}/${name}` : name;
    const st = await lstat(join(root, path));
    if (st.isSymbolicLink()) out[path] = `link ${await readlink(join(root, path))}`;
    else if (st.isDirectory()) {
      out[path] = 'dir';
      Object.assign(out, await readTree(root, path));
    } else out[path] = `file ${await readFile(join(root, path), 'utf8')}`;
  }
  return out;
}

async function unsafe(p: Promise<unknown>, message: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(isUnsafePathError(err), String(err));
    assert.equal(err.reason, UNSAFE_PATH);
    assert.match(err.message, message);
    return true;
  });
}

/** A workspace root next to a "store" the Run must never reach (the reproduction of issue 11 item 2). */
async function setup(): Promise<{ root: string; store: string; base: string }> {
  const base = await makeTmp('safe-dir');
  const root = join(base, 'workspace');
  const store = join(base, 'store');
  await mkdir(join(store, 'namespaces', 'other'), { recursive: true });
  await writeFile(join(store, 'namespaces', 'other', 'secret.txt'), 'secret');
  await mkdir(root);
  return { root, store, base };
}

describe('runtimed/artifacts safe-dir', () => {
  it('creates and opens components below the root; the handle names the directory itself', async () => {
    const { root, base } = await setup();
    await withDirBeneath(root, ['uid', 'a'], { create: 0o755 }, async (dir) => {
      await writeFile(`${dir.path}/f`, 'x');
      assert.equal(dir.shown, `${root}/uid/a`);
    });
    assert.equal(await readFile(join(root, 'uid', 'a', 'f'), 'utf8'), 'x');
    assert.equal(await openDirBeneath(root, ['missing', 'x']), undefined);
    await rm(base, { recursive: true });
  });

  it('refuses a Run directory replaced by a link to the store (issue 11 item 2 reproduction)', async () => {
    const { root, store, base } = await setup();
    await mkdir(join(root, 'uid', 'artifacts'), { recursive: true });
    await rename(join(root, 'uid'), join(root, 'aside'));
    await symlink(store, join(root, 'uid'));
    await unsafe(openDirBeneath(root, ['uid']), /"[^"]*\/uid" is a symbolic link$/);
    await unsafe(openDirBeneath(root, ['uid', 'namespaces'], { create: 0o755 }), /is a symbolic link$/);
    await writeFile(join(root, 'file'), 'x');
    await unsafe(openDirBeneath(root, ['file']), /"[^"]*\/file" is not a directory$/);
    for (const bad of ['..', '.', '', 'a/b', 'a\0b'])
      await unsafe(openDirBeneath(root, [bad]), /is not a single path component/);
    await rm(base, { recursive: true });
  });

  it('keeps working on the opened directory when a Run swaps the path for a link afterwards', async () => {
    const { root, store, base } = await setup();
    await withDirBeneath(root, ['uid'], { create: 0o755 }, async (dir) => {
      await rename(join(root, 'uid'), join(root, 'aside'));
      await symlink(store, join(root, 'uid'));
      await writeFile(`${dir.path}/outputs`, 'K=V');
    });
    assert.equal(await readFile(join(root, 'aside', 'outputs'), 'utf8'), 'K=V');
    await assert.rejects(lstat(join(store, 'outputs')));
    await rm(base, { recursive: true });
  });

  it('removes a tree without following links inside it, as the last segment or in a parent', async () => {
    const { root, store, base } = await setup();
    await mkdir(join(root, 'persistent', 'ws', 'd'), { recursive: true });
    await symlink(store, join(root, 'persistent', 'ws', 'd', 'to-store'));
    await symlink(join(store, 'namespaces'), join(root, 'persistent', 'ws', 'link-dir'));
    await removeBeneath(root, ['persistent', 'ws']);
    await assert.rejects(lstat(join(root, 'persistent', 'ws')));
    await symlink(store, join(root, 'persistent', 'ws2'));
    await removeBeneath(root, ['persistent', 'ws2']);
    await rm(join(root, 'persistent'), { recursive: true });
    await symlink(join(store, 'namespaces'), join(root, 'persistent'));
    await unsafe(removeBeneath(root, ['persistent', 'other']), /"[^"]*\/persistent" is a symbolic link$/);
    await removeBeneath(root, ['missing', 'x']);
    assert.deepEqual(await readTree(store), {
      namespaces: 'dir',
      'namespaces/other': 'dir',
      'namespaces/other/secret.txt': 'file secret',
    });
    await unsafe(removeBeneath(root, []), /refusing to remove the root/);
    await rm(base, { recursive: true });
  });

  it('never descends into a mount point', async function () {
    // '/' and '/proc' are different devices wherever this runs; nothing below is ever removed.
    if (statSync('/').dev === statSync('/proc').dev) this.skip();
    await unsafe(openDirBeneath('/', ['proc'], { sameDevice: true }), /"\/\/proc" is a mount point$/);
    const { root, base } = await setup();
    const mnt = join(root, 'ws', 'mnt');
    await mkdir(mnt, { recursive: true });
    try {
      execFileSync('mount', ['-t', 'tmpfs', 'none', mnt], { stdio: 'ignore' });
    } catch {
      await rm(base, { recursive: true });
      return; // not allowed to mount here; the /proc check above covers the rule
    }
    try {
      await writeFile(join(mnt, 'keep'), 'x');
      await unsafe(removeBeneath(root, ['ws']), /"[^"]*\/ws\/mnt" is a mount point$/);
      assert.equal(await readFile(join(mnt, 'keep'), 'utf8'), 'x');
    } finally {
      execFileSync('umount', [mnt]);
    }
    await rm(base, { recursive: true });
  });

  it('refuses trees deeper than MAX_DIR_DEPTH instead of exhausting descriptors', async () => {
    const { root, base } = await setup();
    const deep = Array.from({ length: MAX_DIR_DEPTH + 1 }, () => 'd');
    await mkdir(join(root, 'ws', ...deep), { recursive: true });
    await unsafe(removeBeneath(root, ['ws']), new RegExp(`nested deeper than ${MAX_DIR_DEPTH} levels`));
    await rm(base, { recursive: true });
  });
});

/** A random tree below the workspace: directories, files, and links to the store, to '..' or to absolute paths. */
const entryArb = fc.record({
  path: fc.array(fc.constantFrom('a', 'b', 'c'), { minLength: 1, maxLength: 4 }),
  kind: fc.constantFrom('dir', 'file', 'link-store', 'link-up', 'link-abs'),
});

async function plant(root: string, store: string, entries: { path: string[]; kind: string }[]): Promise<void> {
  for (const e of entries) {
    const abs = join(root, ...e.path);
    await mkdir(join(abs, '..'), { recursive: true }).catch(() => undefined);
    const target = e.kind === 'link-store' ? store : e.kind === 'link-up' ? '../../..' : '/';
    const make = e.kind === 'dir' ? mkdir(abs) : e.kind === 'file' ? writeFile(abs, 'f') : symlink(target, abs);
    await make.catch(() => undefined);
  }
}

/** What an lstat walk says about root/segments: 'ok', 'missing', or 'unsafe'. */
function expected(root: string, segments: string[]): 'ok' | 'missing' | 'unsafe' {
  let p = root;
  for (const s of segments) {
    p = join(p, s);
    let st;
    try {
      st = lstatSync(p);
    } catch {
      return 'missing';
    }
    if (!st.isDirectory()) return 'unsafe';
  }
  return 'ok';
}

describe('runtimed/artifacts safe-dir properties', () => {
  it('opens exactly root/segments or refuses; never resolves outside the root', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(entryArb, { maxLength: 12 }),
        fc.array(fc.constantFrom('a', 'b', 'c'), { minLength: 1, maxLength: 4 }),
        async (entries, segments) => {
          const { root, store, base } = await setup();
          try {
            await plant(root, store, entries);
            const want = expected(root, segments);
            if (want === 'unsafe') {
              await assert.rejects(openDirBeneath(root, segments), (e: unknown) => isUnsafePathError(e));
              return;
            }
            const dir = await openDirBeneath(root, segments);
            if (want === 'missing') {
              assert.equal(dir, undefined);
              return;
            }
            assert.ok(dir);
            assert.equal(await realpath(dir.path), await realpath(join(root, ...segments)));
            await dir.close();
          } finally {
            await rm(base, { recursive: true, force: true });
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it('removeBeneath never removes anything outside the root and removes the target when its parents are real', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(entryArb, { maxLength: 12 }),
        fc.array(fc.constantFrom('a', 'b', 'c'), { minLength: 1, maxLength: 3 }),
        async (entries, segments) => {
          const { root, store, base } = await setup();
          try {
            await plant(root, store, entries);
            const before = await readTree(store);
            const parents = expected(root, segments.slice(0, -1));
            const done = await removeBeneath(root, segments).then(
              () => true,
              (e: unknown) => {
                assert.ok(isUnsafePathError(e), String(e));
                return false;
              },
            );
            assert.deepEqual(await readTree(store), before);
            assert.equal(done, parents !== 'unsafe');
            if (parents === 'ok') await assert.rejects(lstat(join(root, ...segments)));
          } finally {
            await rm(base, { recursive: true, force: true });
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it('walkTree yields only entries below the root and refuses any link', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(entryArb, { maxLength: 12 }), async (entries) => {
        const { root, store, base } = await setup();
        try {
          await plant(root, store, entries);
          const hasLink = Object.values(await readTree(root)).some((v) => v.startsWith('link'));
          const seen: string[] = [];
          const walked = await (async () => {
            for await (const e of walkTree(root, { label: 'artifact "t"', reason: 'ArtifactInvalid' }))
              seen.push(e.rel);
          })().then(
            () => true,
            (e: unknown) => {
              assert.match(String(e), /symbolic links are not allowed/);
              return false;
            },
          );
          assert.equal(walked, !hasLink);
          for (const rel of seen) assert.ok(!rel.split('/').includes('..') && !rel.startsWith('/'));
          if (walked) assert.deepEqual(seen.sort(), Object.keys(await readTree(root)).sort());
        } finally {
          await rm(base, { recursive: true, force: true });
        }
      }),
      { numRuns: 60 },
    );
  });
});

describe('a pinned root (runtimed keeps its workspace root open)', () => {
  it('is opened once: walks below it neither reopen nor close it, and a swap of its path for a link is not followed', async () => {
    const tmp = await makeTmp('pinned-');
    const root = join(tmp, 'workspace');
    await mkdir(root);
    const pinned = new PinnedDir(root);
    const first = await pinned.get();
    for (const uid of ['a', 'b']) {
      const dir = await openDirBeneath(await pinned.get(), [uid, 'outputs'], { create: 0o775 });
      await dir!.close();
      await removeBeneath(await pinned.get(), [uid, 'outputs']);
    }
    assert.equal(await pinned.get(), first, 'the same handle every time');
    assert.deepEqual(await readdir(first.path), ['a', 'b'], 'still open after the walks');
    // The path now names another directory through a link: the pinned root stays the one it opened.
    await rename(root, join(tmp, 'moved'));
    await mkdir(join(tmp, 'elsewhere'));
    await symlink(join(tmp, 'elsewhere'), root);
    await (await openDirBeneath(first, ['c'], { create: 0o775 }))!.close();
    assert.deepEqual((await readdir(join(tmp, 'moved'))).sort(), ['a', 'b', 'c']);
    assert.deepEqual(await readdir(join(tmp, 'elsewhere')), []);
    await pinned.close();
    await rm(tmp, { recursive: true, force: true });
  });

  it('tries again after a failed open', async () => {
    const tmp = await makeTmp('pinned-');
    const pinned = new PinnedDir(join(tmp, 'later'));
    await unsafe(pinned.get(), /cannot open .*ENOENT/);
    await mkdir(join(tmp, 'later'));
    assert.ok((await pinned.get()).path.startsWith('/proc/self/fd/'));
    await pinned.close();
    await rm(tmp, { recursive: true, force: true });
  });
});
