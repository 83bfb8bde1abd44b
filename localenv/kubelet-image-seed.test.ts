import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { copySeed, IMMUTABLE_PARTS, mutableFiles, seedKey } from './kubelet-image-seed.ts';

describe('containerd image seed', () => {
  let dir: string;
  let seed: string;
  const blob = (): string => join(IMMUTABLE_PARTS[0]!, 'sha256', 'abc');
  const layerFile = (): string => join(IMMUTABLE_PARTS[1]!, '1', 'fs', 'usr', 'bin', 'node');
  const metaDb = 'io.containerd.metadata.v1.bolt/meta.db';

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'krt-seed-test-'));
    seed = join(dir, 'seed');
    for (const [f, text] of [
      [blob(), 'blob'],
      [layerFile(), 'node'],
      [metaDb, 'db'],
      ['io.containerd.snapshotter.v1.overlayfs/metadata.db', 'snapdb'],
    ] as const) {
      mkdirSync(join(seed, f, '..'), { recursive: true });
      writeFileSync(join(seed, f), text, { mode: 0o600 });
    }
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('names as mutable every file outside the content blobs and committed snapshots', () => {
    assert.deepEqual(
      mutableFiles(seed)
        .map((f) => f.slice(seed.length + 1))
        .sort(),
      ['io.containerd.metadata.v1.bolt/meta.db', 'io.containerd.snapshotter.v1.overlayfs/metadata.db'],
    );
  });

  it('links the immutable parts into a new root and copies the databases containerd writes', () => {
    const root = join(dir, 'env', 'containerd', 'root');
    assert.equal(copySeed(seed, root), true);
    for (const f of [blob(), layerFile()]) assert.equal(statSync(join(root, f)).ino, statSync(join(seed, f)).ino, f);
    assert.notEqual(statSync(join(root, metaDb)).ino, statSync(join(seed, metaDb)).ino);
    assert.equal(readFileSync(join(root, metaDb), 'utf8'), 'db');
    assert.equal(statSync(join(root, metaDb)).mode & 0o777, 0o600);
    writeFileSync(join(root, metaDb), 'changed by the environment');
    assert.equal(readFileSync(join(seed, metaDb), 'utf8'), 'db');
  });

  it('leaves a root that already has content alone', () => {
    const root = join(dir, 'root');
    mkdirSync(root);
    writeFileSync(join(root, 'x'), '');
    assert.equal(copySeed(seed, root), false);
    assert.throws(() => statSync(join(root, metaDb)));
  });

  it('is keyed by the images it holds', () => {
    const a = [{ digest: 'sha256:1', annotations: { 'io.containerd.image.name': 'x:1' } }];
    assert.equal(seedKey(a), seedKey(JSON.parse(JSON.stringify(a)) as typeof a));
    assert.notEqual(seedKey(a), seedKey([{ ...a[0], digest: 'sha256:2' }]));
  });
});
