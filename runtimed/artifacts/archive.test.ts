import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import fc from 'fast-check';
import { archiveDirectory } from './archive.ts';
import { BLOCK, decodeHeader, isZeroBlock, paddingFor } from './tar.ts';
import { makeTmp, readTree, rejects, treeArb, type Tree, writeTree } from './test-support.ts';

/** Lists a tar with the decoder: [name, typeflag, mode, size]. */
function listTar(tar: Buffer): [string, string, number, number][] {
  const out: [string, string, number, number][] = [];
  let off = 0;
  while (off < tar.length) {
    const block = tar.subarray(off, off + BLOCK);
    if (isZeroBlock(block)) break;
    const h = decodeHeader(block);
    assert.notEqual(typeof h, 'string');
    if (typeof h === 'string') break;
    out.push([h.path.toString('utf8'), h.typeflag, h.mode, h.size]);
    off += BLOCK + h.size + paddingFor(h.size);
  }
  return out;
}

const hasTar = ((): boolean => {
  try {
    execFileSync('tar', ['--version']);
    return true;
  } catch {
    return false;
  }
})();

describe('runtimed/artifacts archiveDirectory', () => {
  let base: string;
  beforeEach(async () => {
    base = await makeTmp('archive');
  });
  afterEach(async () => {
    await rm(base, { recursive: true, force: true });
  });

  it('writes sorted entries with normalised headers and a fixed gzip header', async () => {
    const src = join(base, 'src');
    await writeTree(
      src,
      { 'b.txt': 'bee', 'a/z': 'zed', 'a/y/': null, A: 'upper', 'run.sh': '#!/bin/sh' },
      { modes: { 'run.sh': 0o700 } },
    );
    const out = join(base, 'out.tgz');
    const r = await archiveDirectory(src, out);
    const gz = await readFile(out);
    assert.equal(r.sizeBytes, gz.length);
    assert.equal(r.digest, `sha256:${createHash('sha256').update(gz).digest('hex')}`);
    assert.deepEqual([...gz.subarray(0, 4)], [0x1f, 0x8b, 0x08, 0x00]);
    assert.equal(gz.readUInt32LE(4), 0, 'gzip mtime 0');
    assert.equal(gz[9], 255, 'gzip OS 255');
    const tar = gunzipSync(gz);
    assert.deepEqual(listTar(tar), [
      ['A', '0', 0o644, 5],
      ['a/', '5', 0o755, 0],
      ['a/y/', '5', 0o755, 0],
      ['a/z', '0', 0o644, 3],
      ['b.txt', '0', 0o644, 3],
      ['run.sh', '0', 0o755, 9],
    ]);
    const first = tar.subarray(0, BLOCK);
    assert.equal(first.subarray(108, 116).toString('latin1'), '0000000\0', 'uid 0');
    assert.equal(first.subarray(136, 148).toString('latin1'), '00000000000\0', 'mtime 0');
    assert.ok(isZeroBlock(first.subarray(265, 329)), 'no uname/gname');
    assert.ok(!tar.includes(Buffer.from('PaxHeader')), 'no PAX records');
    assert.equal(tar.length % BLOCK, 0);
  });

  it('produces identical bytes for identical trees regardless of timestamps, creation order and group/other bits', async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(treeArb, fc.integer({ min: 1, max: 2_000_000_000 }), async (tree: Tree, seed) => {
        const one = join(base, `one-${n}`);
        const two = join(base, `two-${n++}`);
        const paths = Object.keys(tree);
        await writeTree(one, tree, { mtime: new Date(seed * 1000) });
        const files = paths.filter((p) => tree[p] !== null);
        await writeTree(two, tree, {
          order: [...paths].reverse(),
          mtime: new Date(1000),
          modes: Object.fromEntries(files.map((p) => [p, 0o604])),
        });
        const a = await archiveDirectory(one, `${one}.tgz`);
        const b = await archiveDirectory(two, `${two}.tgz`);
        assert.equal(a.digest, b.digest);
        assert.ok((await readFile(`${one}.tgz`)).equals(await readFile(`${two}.tgz`)));
      }),
      { numRuns: 40 },
    );
  });

  it('stores names longer than ustar fields and interoperates with system tar', async function () {
    if (!hasTar) this.skip();
    const deep = `${'d'.repeat(120)}/${'e'.repeat(120)}/${'f'.repeat(90)}.txt`;
    const src = join(base, 'src');
    await writeTree(src, { [deep]: 'deep', 'x/y.txt': 'why', 'ü.txt': 'umlaut' });
    await archiveDirectory(src, join(base, 'out.tgz'));
    const listed = execFileSync('tar', ['-tzf', join(base, 'out.tgz')])
      .toString('utf8')
      .trim()
      .split('\n');
    assert.ok(listed.includes(deep) && listed.includes('x/y.txt') && listed.includes('ü.txt'), listed.join(','));
    await mkdir(join(base, 'x'));
    execFileSync('tar', ['-xzf', join(base, 'out.tgz'), '-C', join(base, 'x')]);
    assert.deepEqual(await readTree(join(base, 'x')), await readTree(src));
  });

  it('rejects a symlink anywhere in the tree, naming it', async () => {
    const src = join(base, 'src');
    await writeTree(src, { 'a/b.txt': 'b' });
    await symlink('/etc/passwd', join(src, 'a', 'link'));
    await rejects(
      archiveDirectory(src, join(base, 'o.tgz'), { label: 'artifact "dist"' }),
      'ArtifactInvalid',
      /^artifact "dist": "a\/link": symbolic links are not allowed$/,
    );
    assert.equal(existsSync(join(base, 'o.tgz')), false, 'partial archive removed');
  });

  it('rejects special files', async () => {
    const src = join(base, 'src');
    await mkdir(src);
    execFileSync('mkfifo', [join(src, 'pipe')]);
    await rejects(
      archiveDirectory(src, join(base, 'o.tgz')),
      'ArtifactInvalid',
      /"pipe": special files are not allowed/,
    );
  });

  it('enforces entry, source and stored size bounds', async () => {
    const src = join(base, 'src');
    await writeTree(src, { a: 'x'.repeat(100), b: 'y'.repeat(100), c: null });
    await rejects(
      archiveDirectory(src, join(base, '1.tgz'), { maxEntries: 2 }),
      'ArtifactInvalid',
      /more than 2 entries/,
    );
    await rejects(
      archiveDirectory(src, join(base, '2.tgz'), { maxSourceBytes: 150 }),
      'ArtifactInvalid',
      /size exceeds 150 bytes/,
    );
    await rejects(
      archiveDirectory(src, join(base, '3.tgz'), { maxStoredBytes: 20 }),
      'ArtifactInvalid',
      /stored size exceeds 20 bytes/,
    );
  });

  it('never overwrites an existing output path or a source that is not a directory', async () => {
    const src = join(base, 'src');
    await writeTree(src, { a: 'a' });
    await writeFile(join(base, 'exists.tgz'), 'keep');
    await rejects(archiveDirectory(src, join(base, 'exists.tgz')), 'ArtifactStoreError', /EEXIST/);
    assert.equal(await readFile(join(base, 'exists.tgz'), 'utf8'), 'keep');
    await rejects(
      archiveDirectory(join(src, 'a'), join(base, 'f.tgz')),
      'ArtifactInvalid',
      /source is not a directory/,
    );
  });

  it('archives an empty directory as just the end marker', async () => {
    await mkdir(join(base, 'empty'));
    await archiveDirectory(join(base, 'empty'), join(base, 'e.tgz'));
    assert.ok(gunzipSync(await readFile(join(base, 'e.tgz'))).equals(Buffer.alloc(1024)));
  });
});
