import assert from 'node:assert/strict';
import { FakeState } from '../../lib/fn/fake-state.ts';
import { R } from '../../lib/fn/resources.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import {
  GIVE_UP_MS,
  HANDOFF_MS,
  ORPHAN_AFTER_MS,
  collect,
  gcStore,
  judgeRun,
  secretRefs,
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

  describe('with its own store credentials (ADR 0022)', () => {
    const b64 = (v: string): string => Buffer.from(v).toString('base64');
    const secret = (bucket = 'b', endpoint = 'http://s3:9000'): KubeObject => ({
      metadata: { name: 'kruntimes-artifact-gc', namespace: 'kruntimes-system' },
      data: {
        bucket: b64(bucket),
        endpoint: b64(endpoint),
        AWS_ACCESS_KEY_ID: b64('k'),
        AWS_SECRET_ACCESS_KEY: b64('s'),
      },
    });
    const s3run = (over: Partial<RunObj['metadata']> = {}, s3: Record<string, unknown> = {}): RunObj => ({
      ...run(over),
      status: {
        artifactStore: {
          driver: 's3',
          s3: { bucket: 'b', prefix: 'p', endpoint: 'http://s3:9000', forcePathStyle: true, ...s3 },
        },
      },
    });

    it('cleans only stores the Secret is bound to, with a derivable key', () => {
      assert.deepEqual(gcStore(s3run(), secret()), {
        bucket: 'b',
        prefix: 'p',
        endpoint: 'http://s3:9000',
        forcePathStyle: true,
      });
      assert.equal(gcStore(s3run(), undefined), undefined, 'no Secret');
      assert.equal(gcStore(s3run(), secret('other')), undefined, 'another bucket');
      assert.equal(gcStore(s3run({}, { endpoint: 'http://evil:1' }), secret()), undefined, 'another endpoint');
      assert.equal(gcStore(s3run({}, { prefix: 'a/../b' }), secret()), undefined, '.. in the prefix');
      assert.equal(gcStore(s3run({ uid: '..' }), secret()), undefined, 'an unsafe UID');
      const fs = {
        ...run(),
        status: { artifactStore: { driver: 'filesystem', filesystem: { volumeClaimName: 'a' } } },
      };
      assert.equal(gcStore(fs, secret()), undefined, 'Filesystem stores are not reachable from the function');
    });

    it('deletes at once without Runtime Pods, after HANDOFF_MS with them, and gives up after GIVE_UP_MS', () => {
      const store = gcStore(s3run(), secret());
      assert.equal(judgeRun(s3run(), 0, T0 + 1, store).kind, 'delete');
      const w = judgeRun(s3run(), 2, T0 + 1, store);
      assert.deepEqual(w, { kind: 'wait', reason: '', message: '', recheckAt: T0 + HANDOFF_MS });
      assert.equal(judgeRun(s3run(), 2, T0 + HANDOFF_MS, store).kind, 'delete');
      const r = judgeRun(s3run(), 0, T0 + GIVE_UP_MS, store);
      assert.equal(r.kind === 'release' && r.reason, 'NoRuntimePod');
      assert.equal(judgeRun(s3run({ finalizers: [] }), 0, T0 + 1, store).kind, 'ignore');
    });

    it('deletes the bytes first and releases the finalizer only after that (one ordered pair per Run)', () => {
      const state = new FakeState([
        [R.runs, s3run()],
        [R.secrets, secret()],
      ]);
      const ops = collect({ key: 'ns/bash', object: undefined, state, now: new Date(T0 + 1) });
      assert.deepEqual(
        ops.map((o) => o.op),
        ['deleteRunArtifacts', 'patch'],
      );
      assert.deepEqual(ops[0], {
        op: 'deleteRunArtifacts',
        store: { bucket: 'b', prefix: 'p', endpoint: 'http://s3:9000', forcePathStyle: true },
        namespace: 'ns',
        runUID: 'u1',
        credentials: { namespace: 'kruntimes-system', name: 'kruntimes-artifact-gc' },
      });
      assert.ok(!JSON.stringify(ops).includes(b64('s')), 'no credential in the operations');
      assert.deepEqual((ops[1] as { patch: unknown }).patch, {
        metadata: { resourceVersion: '7', finalizers: ['other'] },
      });
    });

    it('reads the Secret only for a key with a deleted S3 Run waiting for cleanup', () => {
      const ref = [{ resource: R.secrets, namespace: 'kruntimes-system', name: 'kruntimes-artifact-gc' }];
      assert.deepEqual(secretRefs({ key: 'ns/bash', state: new FakeState([[R.runs, s3run()]]) }), ref);
      assert.deepEqual(secretRefs({ key: 'ns/', state: new FakeState([[R.runs, s3run()]]) }), []);
      const live = s3run({ deletionTimestamp: undefined });
      assert.deepEqual(secretRefs({ key: 'ns/bash', state: new FakeState([[R.runs, live]]) }), []);
      const fs = { ...run(), status: { artifactStore: { driver: 'filesystem' } } };
      assert.deepEqual(secretRefs({ key: 'ns/bash', state: new FakeState([[R.runs, fs]]) }), []);
    });
  });
});
