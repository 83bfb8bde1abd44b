import assert from 'node:assert/strict';
import { FakeState } from '../../lib/fn/fake-state.ts';
import { R } from '../../lib/fn/resources.ts';
import {
  GIVE_UP_MS,
  ORPHAN_AFTER_MS,
  collect,
  judgeRun,
  releaseIdentity,
  storeLocation,
  type RunObj,
} from './index.ts';

const T0 = Date.parse('2026-12-01T10:00:00Z');
const run = (over: Partial<RunObj['metadata']> = {}): RunObj => ({
  metadata: {
    name: 'r',
    namespace: 'ns',
    uid: 'u1',
    resourceVersion: '7',
    deletionTimestamp: new Date(T0).toISOString(),
    finalizers: ['kruntimes.io/artifact-cleanup', 'other'],
    ...over,
  },
  spec: { runtime: 'bash' },
  status: { artifactStore: { driver: 's3', s3: { bucket: 'b', prefix: 'p/' } } },
});
const pod = { metadata: { name: 'bash-x', namespace: 'ns', labels: { runtime: 'bash' } } };

describe('run-artifact-gc', () => {
  it('names where the bytes are', () => {
    assert.equal(storeLocation(run()), 's3://b/p/namespaces/ns/runs/u1/');
    const fs = {
      ...run(),
      status: { artifactStore: { driver: 'filesystem', filesystem: { volumeClaimName: 'art' } } },
    };
    assert.equal(storeLocation(fs), 'namespaces/ns/runs/u1/ on PVC art');
  });

  it('ignores Runs that are not deleted or carry no cleanup finalizer', () => {
    assert.equal(judgeRun(run({ deletionTimestamp: undefined }), 0, T0).kind, 'ignore');
    assert.equal(judgeRun(run({ finalizers: ['other'] }), 0, T0).kind, 'ignore');
  });

  it('without a Runtime Pod: says why at once, releases after ORPHAN_AFTER_MS', () => {
    const w = judgeRun(run(), 0, T0 + 1000);
    assert.equal(w.kind, 'wait');
    assert.match(
      w.kind === 'wait' ? w.message : '',
      /no Pod of Runtime bash .*s3:\/\/b\/p\/namespaces\/ns\/runs\/u1\//,
    );
    const r = judgeRun(run(), 0, T0 + ORPHAN_AFTER_MS);
    assert.equal(r.kind, 'release');
    assert.equal(r.kind === 'release' && r.reason, 'NoRuntimePod');
  });

  it('with Runtime Pods: leaves the work to runtimed until GIVE_UP_MS, then releases', () => {
    assert.equal(judgeRun(run(), 1, T0 + ORPHAN_AFTER_MS).kind, 'wait');
    const r = judgeRun(run(), 1, T0 + GIVE_UP_MS);
    assert.equal(r.kind === 'release' && r.reason, 'ArtifactCleanupTimeout');
  });

  it('writes the condition once, then removes only its finalizer (resourceVersion-guarded) with an Event', () => {
    const state = new FakeState([[R.runs, run()]]);
    const ops = collect({ key: 'ns/bash', object: undefined, state, now: new Date(T0 + 1000) });
    assert.deepEqual(
      ops.map((o) => o.op),
      ['status', 'requeue'],
    );
    const written = (ops[0] as unknown as { object: RunObj }).object;
    state.put(R.runs, written);
    assert.deepEqual(
      collect({ key: 'ns/bash', object: undefined, state, now: new Date(T0 + 2000) }).map((o) => o.op),
      ['requeue'],
      'no second write for the same reason',
    );
    const rel = collect({ key: 'ns/bash', object: undefined, state, now: new Date(T0 + ORPHAN_AFTER_MS) });
    assert.deepEqual(
      rel.map((o) => o.op),
      ['patch', 'create'],
    );
    assert.deepEqual((rel[0] as { patch: unknown }).patch, {
      metadata: { resourceVersion: '7', finalizers: ['other'] },
    });
  });

  it('waits while a Pod of the Runtime exists', () => {
    const state = new FakeState([
      [R.runs, run()],
      [R.pods, pod],
    ]);
    const ops = collect({ key: 'ns/bash', object: undefined, state, now: new Date(T0 + ORPHAN_AFTER_MS) });
    assert.deepEqual(
      ops.map((o) => o.op),
      ['requeue'],
    );
  });

  it("releases runtimed's ServiceAccount in a namespace being emptied once no Run needs cleanup", () => {
    const sa = {
      metadata: {
        name: 'kruntimes-runtimed',
        namespace: 'ns',
        resourceVersion: '3',
        deletionTimestamp: new Date(T0).toISOString(),
        finalizers: ['kruntimes.io/artifact-cleanup'],
      },
    };
    const state = new FakeState([
      [R.runs, run()],
      [R.serviceAccounts, sa],
    ]);
    assert.deepEqual(
      releaseIdentity('ns', state),
      [{ op: 'requeue', afterMs: 5_000 }],
      'kept while a Run still needs its runtimed',
    );
    state.remove(R.runs, 'ns', 'r');
    const ops = collect({ key: 'ns/', object: undefined, state, now: new Date(T0) });
    assert.deepEqual(ops, [
      {
        op: 'patch',
        resource: R.serviceAccounts,
        namespace: 'ns',
        name: 'kruntimes-runtimed',
        patch: { metadata: { resourceVersion: '3', finalizers: [] } },
      },
    ]);
    state.put(R.serviceAccounts, { metadata: { ...sa.metadata, deletionTimestamp: undefined } });
    assert.deepEqual(releaseIdentity('ns', state), [], 'never released while not being deleted');
  });
});
