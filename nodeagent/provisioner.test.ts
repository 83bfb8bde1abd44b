import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { prepareVolumeDir } from './provisioner.ts';

describe('local-dir provisioner volume directories', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'krt-prov-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('are world-writable whatever the umask (a kubelet applies no fsGroup to hostPath volumes)', () => {
    const old = process.umask(0o022);
    try {
      const p = join(dir, 'pvc-1');
      prepareVolumeDir(p);
      assert.equal(statSync(p).mode & 0o7777, 0o777);
      prepareVolumeDir(p); // idempotent
      assert.equal(statSync(p).mode & 0o7777, 0o777);
    } finally {
      process.umask(old);
    }
  });
});
