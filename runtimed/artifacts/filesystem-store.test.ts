import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { archiveDirectory } from './archive.ts';
import { extractArchive } from './extract.ts';
import { FilesystemArtifactStore } from './filesystem-store.ts';
import type { ArtifactRef } from './store.ts';
import { validateArtifactRef } from './validate.ts';
import { makeTmp, readTree, rejects, writeTree } from './test-support.ts';

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

const sha = (b: Buffer | string): string => `sha256:${createHash('sha256').update(b).digest('hex')}`;
const NOW = new Date('2026-07-06T12:00:00.123Z');

describe('runtimed/artifacts FilesystemArtifactStore', () => {
  let base: string;
  let root: string;
  let src: string;
  let store: FilesystemArtifactStore;
  beforeEach(async () => {
    base = await makeTmp('fsstore');
    root = join(base, 'store');
    src = join(base, 'staging');
    await mkdir(src);
    store = await FilesystemArtifactStore.create({ root, volumeClaimName: 'artifacts', now: () => NOW });
  });
  afterEach(async () => {
    await rm(base, { recursive: true, force: true });
  });

  /** The run directory holds only published artifacts: no temporaries left. */
  async function runDirEntries(): Promise<string[]> {
    return (await readdir(join(root, 'namespaces/ns/runs/uid-1'))).sort();
  }

  it('stores a file under namespaces/<ns>/runs/<uid>/<name> with digest, size and content type', async () => {
    await writeFile(join(src, 'report.json'), '{"ok":true}');
    const ref = await store.put('ns', 'uid-1', 'report.json', join(src, 'report.json'), 'file');
    assert.deepEqual(ref, {
      name: 'report.json',
      driver: 'filesystem',
      type: 'file',
      sizeBytes: 11,
      digest: sha('{"ok":true}'),
      contentType: 'application/json',
      createdAt: '2026-07-06T12:00:00Z',
      location: { filesystem: { path: 'namespaces/ns/runs/uid-1/report.json', volumeClaimName: 'artifacts' } },
    });
    assert.equal(await readFile(join(root, 'namespaces/ns/runs/uid-1/report.json'), 'utf8'), '{"ok":true}');
    assert.deepEqual(validateArtifactRef(ref), ref);
    assert.deepEqual(await runDirEntries(), ['report.json']);
  });

  it('detects content types by extension, then by sniffing, else octet-stream', async () => {
    const cases: [string, Buffer | string, string][] = [
      ['notes', 'plain text\n', 'text/plain; charset=utf-8'],
      ['page', '<!DOCTYPE html><html></html>', 'text/html; charset=utf-8'],
      ['blob', Buffer.from([0, 1, 2, 3]), 'application/octet-stream'],
      ['empty', '', 'application/octet-stream'],
      ['packed', Buffer.from([0x1f, 0x8b, 0x08, 0, 0]), 'application/x-gzip'],
      ['dist.tgz', 'not really gzip', 'application/gzip'],
      ['a.PNG', 'x', 'image/png'],
    ];
    for (const [name, content, type] of cases) {
      await writeFile(join(src, name), content);
      assert.equal((await store.put('ns', 'uid-1', name, join(src, name), 'file')).contentType, type, name);
    }
  });

  it('stores a directory as its deterministic tar.gz and opens it back', async () => {
    await writeTree(join(src, 'dist'), { 'bin/app': 'app', 'README.md': 'readme', 'empty/': null });
    const ref = await store.put('ns', 'uid-1', 'dist', join(src, 'dist'), {
      type: 'directory',
      runName: 'r',
      runtime: 'bash',
    });
    assert.equal(ref.type, 'directory');
    assert.equal(ref.contentType, 'application/gzip');
    const stored = await readFile(join(root, 'namespaces/ns/runs/uid-1/dist'));
    assert.equal(ref.digest, sha(stored));
    assert.equal(ref.sizeBytes, stored.length);
    await archiveDirectory(join(src, 'dist'), join(base, 'again.tgz'));
    assert.ok(stored.equals(await readFile(join(base, 'again.tgz'))), 'same bytes as archiveDirectory');
    const opened = await readAll(await store.open(ref, { namespace: 'ns' }));
    assert.ok(opened.equals(stored));
    await writeFile(join(base, 'dl.tgz'), opened);
    await extractArchive(join(base, 'dl.tgz'), join(base, 'restored'));
    assert.deepEqual(await readTree(join(base, 'restored')), await readTree(join(src, 'dist')));
  });

  it('replaces a previous value of the same artifact deterministically', async () => {
    await writeFile(join(src, 'a'), 'one');
    await store.put('ns', 'uid-1', 'a', join(src, 'a'), 'file');
    await rm(join(src, 'a'));
    await mkdir(join(src, 'a'));
    await writeFile(join(src, 'a', 'f'), 'two');
    const ref = await store.put('ns', 'uid-1', 'a', join(src, 'a'), 'directory');
    assert.equal(ref.type, 'directory');
    assert.deepEqual(await runDirEntries(), ['a']);
  });

  it('rejects bad names, unsafe namespace/UID, type mismatches, symlinks and special sources', async () => {
    await writeFile(join(src, 'f'), 'x');
    await rejects(
      store.put('ns', 'uid-1', '..', join(src, 'f'), 'file'),
      'ArtifactInvalid',
      /must not contain path separators/,
    );
    await rejects(
      store.put('ns', 'uid-1', 'a/b', join(src, 'f'), 'file'),
      'ArtifactInvalid',
      /must not contain path separators/,
    );
    await rejects(
      store.put('ns', 'uid-1', '', join(src, 'f'), 'file'),
      'ArtifactInvalid',
      /^artifact name is required$/,
    );
    await rejects(
      store.put('ns', 'uid-1', 'x'.repeat(256), join(src, 'f'), 'file'),
      'ArtifactInvalid',
      /exceeds 255 bytes/,
    );
    await rejects(
      store.put('..', 'uid-1', 'f', join(src, 'f'), 'file'),
      'ArtifactInvalid',
      /^run namespace ".." is not a safe path component$/,
    );
    await rejects(
      store.put('ns', 'a/b', 'f', join(src, 'f'), 'file'),
      'ArtifactInvalid',
      /^run UID "a\/b" is not a safe path component$/,
    );
    await rejects(
      store.put('ns', 'uid-1', 'f', join(src, 'f'), 'directory'),
      'ArtifactInvalid',
      /type "directory" does not match source type "file"/,
    );
    await symlink(join(src, 'f'), join(src, 'l'));
    await rejects(
      store.put('ns', 'uid-1', 'l', join(src, 'l'), 'file'),
      'ArtifactInvalid',
      /^artifact "l": symbolic links are not allowed$/,
    );
    await rejects(
      store.put('ns', 'uid-1', 'm', join(src, 'missing'), 'file'),
      'ArtifactInvalid',
      /cannot inspect: ENOENT/,
    );
  });

  it('enforces the per-artifact and per-call size limits on stored bytes', async () => {
    const small = await FilesystemArtifactStore.create({ root, volumeClaimName: 'artifacts', maxArtifactBytes: 10 });
    await writeFile(join(src, 'big'), 'x'.repeat(11));
    await rejects(
      small.put('ns', 'uid-1', 'big', join(src, 'big'), 'file'),
      'ArtifactInvalid',
      /^artifact "big": size 11 exceeds 10 bytes$/,
    );
    await writeFile(join(src, 'mid'), 'x'.repeat(6));
    await rejects(
      store.put('ns', 'uid-1', 'mid', join(src, 'mid'), { type: 'file', maxSizeBytes: 5 }),
      'ArtifactInvalid',
      /exceeds 5 bytes/,
    );
    await writeTree(join(src, 'd'), { a: 'y'.repeat(100) });
    await rejects(
      store.put('ns', 'uid-1', 'd', join(src, 'd'), { type: 'directory', maxSizeBytes: 30 }),
      'ArtifactInvalid',
      /stored size exceeds 30 bytes/,
    );
    assert.deepEqual(await runDirEntries(), [], 'no temporaries or partial artifacts');
  });

  it('refuses to create parents through a symlink inside the store', async () => {
    const elsewhere = join(base, 'elsewhere');
    await mkdir(elsewhere);
    await mkdir(join(root, 'namespaces'), { recursive: true });
    await symlink(elsewhere, join(root, 'namespaces', 'ns'));
    await writeFile(join(src, 'f'), 'x');
    await rejects(store.put('ns', 'uid-1', 'f', join(src, 'f'), 'file'), 'ArtifactStoreError', /is a symbolic link/);
    assert.deepEqual(await readdir(elsewhere), []);
  });

  it('opens only references it owns', async () => {
    await writeFile(join(src, 'f'), 'content');
    const ref = await store.put('ns', 'uid-1', 'f', join(src, 'f'), 'file');
    const fsLoc = (path: string, claim = 'artifacts'): ArtifactRef => ({
      ...ref,
      location: { filesystem: { path, volumeClaimName: claim } },
    });
    assert.equal((await readAll(await store.open(ref))).toString(), 'content');
    assert.equal(
      (await readAll(await store.open(fsLoc(ref.location.filesystem?.path ?? '', '')))).toString(),
      'content',
      'claim may be omitted',
    );
    await rejects(
      store.open(fsLoc('namespaces/ns/runs/uid-1/f', 'other')),
      'ArtifactInputInvalid',
      /belongs to volume claim "other", not "artifacts"/,
    );
    await rejects(
      store.open(fsLoc('../store/namespaces/ns/runs/uid-1/f')),
      'ArtifactInputInvalid',
      /must not contain empty, "." or ".." segments/,
    );
    await rejects(store.open(fsLoc('/etc/passwd')), 'ArtifactInputInvalid', /must be a relative path/);
    await rejects(store.open(fsLoc('elsewhere/f')), 'ArtifactInputInvalid', /outside the artifact store layout/);
    await rejects(store.open(ref, { namespace: 'other' }), 'ArtifactInputInvalid', /another namespace than "other"/);
    await rejects(
      store.open({ ...ref, driver: 's3', location: { s3: { bucket: 'b', key: 'k' } } }),
      'ArtifactInputInvalid',
      /not a filesystem artifact/,
    );
    await rejects(
      store.open(fsLoc('namespaces/ns/runs/uid-1/missing')),
      'ArtifactNotFound',
      /^artifact "f" was not found in the artifact store$/,
    );
    await rejects(store.open(fsLoc('namespaces/ns/runs/uid-9/f')), 'ArtifactNotFound', /was not found/);
    await symlink('/etc/hostname', join(root, 'namespaces/ns/runs/uid-1/evil'));
    await rejects(
      store.open(fsLoc('namespaces/ns/runs/uid-1/evil')),
      'ArtifactInputInvalid',
      /stored object is a symbolic link/,
    );
    await rejects(
      store.open({ name: 'x' } as unknown as ArtifactRef),
      'ArtifactInputInvalid',
      /unsupported artifact driver/,
    );
  });

  it('deletes everything of one Run and nothing else', async () => {
    await writeFile(join(src, 'f'), 'x');
    await store.put('ns', 'uid-1', 'f', join(src, 'f'), 'file');
    await store.put('ns', 'uid-2', 'f', join(src, 'f'), 'file');
    await store.deleteRun('ns', 'uid-1');
    assert.equal(existsSync(join(root, 'namespaces/ns/runs/uid-1')), false);
    assert.ok(existsSync(join(root, 'namespaces/ns/runs/uid-2/f')));
    await store.deleteRun('ns', 'uid-1');
    await store.deleteRun('other-ns', 'uid-3');
    await rejects(store.deleteRun('ns', '..'), 'ArtifactInvalid', /not a safe path component/);
    const victim = join(base, 'victim');
    await writeTree(victim, { keep: 'keep' });
    await symlink(victim, join(root, 'namespaces/ns/runs/uid-4'));
    await rejects(store.deleteRun('ns', 'uid-4'), 'ArtifactStoreError', /is a symbolic link/);
    assert.equal(await readFile(join(victim, 'keep'), 'utf8'), 'keep');
  });

  it('validates its configuration', async () => {
    await rejects(
      FilesystemArtifactStore.create({ root: 'relative', volumeClaimName: 'c' }),
      'ArtifactStoreConfigInvalid',
      /absolute path/,
    );
    await rejects(
      FilesystemArtifactStore.create({ root, volumeClaimName: '' }),
      'ArtifactStoreConfigInvalid',
      /volume claim name is required/,
    );
    await rejects(
      FilesystemArtifactStore.create({ root, volumeClaimName: 'c', maxArtifactBytes: 0 }),
      'ArtifactStoreConfigInvalid',
      /must be positive/,
    );
  });
});
