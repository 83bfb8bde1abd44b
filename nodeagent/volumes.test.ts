import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { applyFsGroup, prepareVolume, type VolumeContext } from './volumes.ts';

const ctx = (podDir: string, fsGroup?: number): VolumeContext => ({
  pod: {
    metadata: { name: 'p', namespace: 'ns', uid: 'u' },
    spec: { containers: [], ...(fsGroup !== undefined ? { securityContext: { fsGroup } } : {}) },
  },
  podDir,
  client: undefined as never,
  data: undefined as never,
  clusterCa: '',
  podIP: '127.0.0.2',
  hostIP: '127.0.0.1',
  now: () => 0,
});

describe('node agent volume ownership (kubelet SetVolumeOwnership)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'krt-vol-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const mode = (p: string): number => statSync(p).mode & 0o7777;

  it('an emptyDir is 0777, and 02777 owned by the fsGroup when the Pod has one', async () => {
    const plain = await prepareVolume(ctx(join(dir, 'a')), { name: 'w', emptyDir: {} });
    assert.equal(mode(plain.hostPath), 0o777);
    const owned = await prepareVolume(ctx(join(dir, 'b'), 4242), { name: 'w', emptyDir: {} });
    assert.equal(mode(owned.hostPath), 0o2777);
    assert.equal(statSync(owned.hostPath).gid, 4242);
  });

  it('gives every file the fsGroup and group rw, and directories setgid', () => {
    mkdirSync(join(dir, 'sub'));
    writeFileSync(join(dir, 'sub', 'f'), 'x', { mode: 0o600 });
    applyFsGroup(dir, 4242);
    for (const p of [dir, join(dir, 'sub'), join(dir, 'sub', 'f')]) assert.equal(statSync(p).gid, 4242, p);
    assert.equal(mode(join(dir, 'sub', 'f')), 0o660);
    assert.equal(mode(join(dir, 'sub')) & 0o2070, 0o2070);
  });
});
