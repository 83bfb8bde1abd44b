import assert from 'node:assert/strict';
import { mkdir, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { isArtifactError } from './errors.ts';
import { FilesystemArtifactStore } from './filesystem-store.ts';
import { inputPathSegments, stageArtifactInput, stageArtifactInputs } from './stage.ts';
import type { ArtifactRef } from './store.ts';
import { makeTmp, rawTgz, readTree, rejects, writeTree } from './test-support.ts';

describe('runtimed/artifacts artifact inputs (seed 000)', () => {
  let base: string;
  let root: string;
  let work: string;
  let store: FilesystemArtifactStore;
  let fileRef: ArtifactRef;
  let dirRef: ArtifactRef;
  beforeEach(async () => {
    base = await makeTmp('stage');
    root = join(base, 'store');
    work = join(base, 'work');
    await mkdir(work);
    store = await FilesystemArtifactStore.create({ root, volumeClaimName: 'artifacts' });
    await writeTree(join(base, 'produced'), {
      'dist.tgz': 'tarball bytes',
      'site/index.html': '<html>',
      'site/js/app.js': 'js',
      'site/empty/': null,
    });
    fileRef = await store.put('ns', 'producer', 'dist.tgz', join(base, 'produced/dist.tgz'), 'file');
    dirRef = await store.put('ns', 'producer', 'site', join(base, 'produced/site'), 'directory');
  });
  afterEach(async () => {
    await rm(base, { recursive: true, force: true });
  });

  it('copies a file artifact and extracts a directory artifact at their relative paths', async () => {
    const staged = await stageArtifactInputs(
      store,
      [
        { artifactRef: fileRef, path: 'dist.tgz' },
        { artifactRef: dirRef, path: 'inputs/site' },
      ],
      work,
      { namespace: 'ns' },
    );
    assert.deepEqual(staged, [
      { path: 'dist.tgz', type: 'file', sizeBytes: fileRef.sizeBytes },
      { path: 'inputs/site', type: 'directory', sizeBytes: dirRef.sizeBytes },
    ]);
    assert.equal(await readFile(join(work, 'dist.tgz'), 'utf8'), 'tarball bytes');
    assert.deepEqual(await readTree(join(work, 'inputs/site')), await readTree(join(base, 'produced/site')));
    assert.deepEqual((await readdir(work)).sort(), ['dist.tgz', 'inputs'], 'no temporary files');
    assert.deepEqual(await readdir(join(work, 'inputs')), ['site']);
  });

  it('validates destination paths', () => {
    assert.deepEqual(inputPathSegments('./a//b/'), ['a', 'b']);
    const bad: [unknown, RegExp][] = [
      ['', /path is required/],
      [undefined, /path is required/],
      ['/abs', /must be relative/],
      ['../x', /must not contain a '..' segment/],
      ['a/../../x', /'\.\.' segment/],
      ['.', /must name an entry below the working directory/],
      ['a\\b', /NUL or backslash/],
    ];
    for (const [path, message] of bad) {
      assert.throws(
        () => inputPathSegments(path),
        (e: unknown) => isArtifactError(e, 'ArtifactInputInvalid') && message.test(e.message),
      );
    }
  });

  it('rejects overlapping destinations and malformed input lists before staging anything', async () => {
    await rejects(
      stageArtifactInputs(
        store,
        [
          { artifactRef: fileRef, path: 'a' },
          { artifactRef: dirRef, path: 'a/b' },
        ],
        work,
      ),
      'ArtifactInputInvalid',
      /^artifact input paths "a" and "a\/b" overlap$/,
    );
    await rejects(
      stageArtifactInputs(
        store,
        [
          { artifactRef: fileRef, path: 'x' },
          { artifactRef: { name: 'bad' }, path: 'y' },
        ],
        work,
      ),
      'ArtifactInputInvalid',
      /unsupported artifact driver/,
    );
    await rejects(stageArtifactInputs(store, 'nope', work), 'ArtifactInputInvalid', /must be a list/);
    await rejects(
      stageArtifactInputs(store, [null], work),
      'ArtifactInputInvalid',
      /artifact input #1 must be an object/,
    );
    assert.deepEqual(await readdir(work), []);
    assert.deepEqual(await stageArtifactInputs(store, undefined, work), []);
  });

  it('refuses an existing destination and a symlinked parent in the working directory', async () => {
    await writeFile(join(work, 'dist.tgz'), 'mine');
    await rejects(
      stageArtifactInput(store, { artifactRef: fileRef, path: 'dist.tgz' }, work),
      'ArtifactInputConflict',
      /^artifact "dist.tgz" for path "dist.tgz": destination already exists with different content$/,
    );
    assert.equal(await readFile(join(work, 'dist.tgz'), 'utf8'), 'mine');
    assert.deepEqual((await readdir(work)).sort(), ['dist.tgz'], 'no temporary files');
    const outside = join(base, 'outside');
    await mkdir(outside);
    await symlink(outside, join(work, 'escape'));
    await rejects(
      stageArtifactInput(store, { artifactRef: dirRef, path: 'escape/site' }, work),
      'ArtifactInputInvalid',
      /is a symbolic link/,
    );
    assert.deepEqual(await readdir(outside), []);
  });

  it('re-stages the same artifact idempotently (a second step, an in-place retry) and leaves it as it is', async () => {
    const inputs = [
      { artifactRef: fileRef, path: 'dist.tgz' },
      { artifactRef: dirRef, path: 'inputs/site' },
    ];
    const first = await stageArtifactInputs(store, inputs, work, { namespace: 'ns' });
    const again = await stageArtifactInputs(store, inputs, work, { namespace: 'ns' });
    assert.deepEqual(again, first);
    assert.equal(await readFile(join(work, 'dist.tgz'), 'utf8'), 'tarball bytes');
    assert.deepEqual(await readTree(join(work, 'inputs/site')), await readTree(join(base, 'produced/site')));
    assert.deepEqual((await readdir(work)).sort(), ['dist.tgz', 'inputs'], 'no temporary files');
    assert.deepEqual(await readdir(join(work, 'inputs')), ['site']);
  });

  it('refuses a different artifact onto an existing path (file, directory, kind, symlink) without touching it', async () => {
    await stageArtifactInput(store, { artifactRef: dirRef, path: 'site' }, work);
    await writeFile(join(work, 'site/js/app.js'), 'changed');
    await rejects(
      stageArtifactInput(store, { artifactRef: dirRef, path: 'site' }, work),
      'ArtifactInputConflict',
      /destination already exists with different content/,
    );
    assert.equal(await readFile(join(work, 'site/js/app.js'), 'utf8'), 'changed');
    await writeFile(join(work, 'site/js/app.js'), 'js');
    await writeFile(join(work, 'site/extra'), 'x');
    await rejects(stageArtifactInput(store, { artifactRef: dirRef, path: 'site' }, work), 'ArtifactInputConflict', /./);
    await rejects(
      stageArtifactInput(store, { artifactRef: fileRef, path: 'site' }, work),
      'ArtifactInputConflict',
      /./,
    );
    await writeFile(join(base, 'same.tgz'), 'tarball bytes');
    await symlink(join(base, 'same.tgz'), join(work, 'linked.tgz'));
    await rejects(
      stageArtifactInput(store, { artifactRef: fileRef, path: 'linked.tgz' }, work),
      'ArtifactInputConflict',
      /./,
    );
    assert.deepEqual((await readdir(work)).sort(), ['linked.tgz', 'site'], 'no temporary files');
  });

  it('keeps a destination that was already there when a later input fails', async () => {
    await stageArtifactInput(store, { artifactRef: fileRef, path: 'dist.tgz' }, work);
    const missing: ArtifactRef = { ...fileRef, location: { filesystem: { path: 'namespaces/ns/runs/producer/gone' } } };
    await rejects(
      stageArtifactInputs(
        store,
        [
          { artifactRef: fileRef, path: 'dist.tgz' },
          { artifactRef: missing, path: 'gone' },
        ],
        work,
      ),
      'ArtifactNotFound',
      /was not found/,
    );
    assert.deepEqual(await readdir(work), ['dist.tgz']);
  });

  it('verifies the stored bytes against the reference digest and size', async () => {
    await writeFile(join(root, fileRef.location.filesystem?.path ?? ''), 'tampered bytes');
    await rejects(
      stageArtifactInput(store, { artifactRef: fileRef, path: 'out/f' }, work),
      'ArtifactInputInvalid',
      /^artifact "dist.tgz" for path "out\/f": content exceeds 13 bytes$/,
    );
    await writeFile(join(root, fileRef.location.filesystem?.path ?? ''), 'short');
    await rejects(
      stageArtifactInput(store, { artifactRef: fileRef, path: 'out/f' }, work),
      'ArtifactInputInvalid',
      /size 5 does not match the reference size 13/,
    );
    await writeFile(join(root, fileRef.location.filesystem?.path ?? ''), 'TARBALL BYTES');
    await rejects(
      stageArtifactInput(store, { artifactRef: fileRef, path: 'out/f' }, work),
      'ArtifactInputInvalid',
      /does not match the reference digest/,
    );
    assert.deepEqual(await readdir(work), [], 'created parent removed again');
  });

  it('rejects a malicious directory archive in the store and leaves the working directory clean', async () => {
    const evil = rawTgz([
      { name: 'ok.txt', data: 'ok' },
      { name: '../../escaped', data: 'pwned' },
    ]);
    await writeFile(join(root, dirRef.location.filesystem?.path ?? ''), evil);
    const ref: ArtifactRef = { ...dirRef, sizeBytes: evil.length };
    delete ref.digest;
    await rejects(
      stageArtifactInput(store, { artifactRef: ref, path: 'deep/site' }, work),
      'ArtifactInputInvalid',
      /^artifact "site" for path "deep\/site": entry "..\/..\/escaped": ".." path segments are not allowed$/,
    );
    assert.deepEqual(await readdir(work), []);
    assert.deepEqual((await readdir(base)).sort(), ['produced', 'store', 'work']);
  });

  it('rolls back inputs already staged when a later one fails', async () => {
    const missing: ArtifactRef = {
      ...fileRef,
      name: 'gone',
      location: { filesystem: { path: 'namespaces/ns/runs/producer/gone' } },
    };
    await rejects(
      stageArtifactInputs(
        store,
        [
          { artifactRef: dirRef, path: 'a/site' },
          { artifactRef: fileRef, path: 'b/dist.tgz' },
          { artifactRef: missing, path: 'c/gone' },
        ],
        work,
      ),
      'ArtifactNotFound',
      /artifact "gone" was not found/,
    );
    assert.deepEqual(await readdir(work), []);
  });

  it('honours the namespace scope and the size limit', async () => {
    await rejects(
      stageArtifactInput(store, { artifactRef: fileRef, path: 'f' }, work, { namespace: 'other' }),
      'ArtifactInputInvalid',
      /another namespace/,
    );
    await rejects(
      stageArtifactInput(store, { artifactRef: fileRef, path: 'f' }, work, { limits: { maxBytes: 5 } }),
      'ArtifactInputInvalid',
      /size 13 exceeds 5 bytes/,
    );
    await rejects(
      stageArtifactInput(store, { artifactRef: dirRef, path: 'd' }, work, { limits: { maxEntries: 2 } }),
      'ArtifactInputInvalid',
      /more than 2 entries/,
    );
    assert.deepEqual(await readdir(work), []);
  });
});
