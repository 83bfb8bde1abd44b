import assert from 'node:assert/strict';
import { OTHER_POD_DELAY_MS, cleanupPlan } from './artifact-gc.ts';
import type { RuntimeArtifactStoreSpec } from './artifacts/index.ts';
import type { Run } from './types.ts';

const store: RuntimeArtifactStoreSpec = { driver: 's3', s3: { bucket: 'b', credentialsSecretName: 'c' } };
const deleted = (over: Partial<Run['metadata']> = {}, status: Run['status'] = {}): Run => ({
  metadata: {
    name: 'r',
    uid: 'u',
    deletionTimestamp: '2026-12-01T10:00:00Z',
    finalizers: ['kruntimes.io/artifact-cleanup'],
    ...over,
  },
  spec: { runtime: 'bash' },
  status: { assignedPod: 'old-pod', artifactStore: store, ...status },
});
const me = { podName: 'new-pod', runtime: 'bash', store };

describe('runtimed artifact cleanup plan', () => {
  it('cleans a deleted Run of its Runtime whatever Pod ran it; the assigned Pod first', () => {
    assert.deepEqual(cleanupPlan(deleted(), me), { act: true, delayMs: OTHER_POD_DELAY_MS });
    assert.deepEqual(cleanupPlan(deleted(), { ...me, podName: 'old-pod' }), { act: true, delayMs: 0 });
    assert.deepEqual(cleanupPlan(deleted({}, { assignedPod: 'old-pod' }), me), {
      act: true,
      delayMs: OTHER_POD_DELAY_MS,
    });
  });

  it('leaves Runs alone that are not deleted, have no finalizer, belong to another Runtime or store', () => {
    assert.equal(cleanupPlan(deleted({ deletionTimestamp: undefined }), me).act, false);
    assert.equal(cleanupPlan(deleted({ finalizers: [] }), me).act, false);
    assert.equal(cleanupPlan(deleted(), { ...me, runtime: 'python' }).act, false);
    assert.equal(cleanupPlan(deleted(), { podName: 'new-pod', runtime: 'bash' }).act, false);
    const other = { ...store, s3: { ...store.s3!, bucket: 'elsewhere' } };
    assert.equal(cleanupPlan(deleted(), { ...me, store: other }).act, false);
  });
});
