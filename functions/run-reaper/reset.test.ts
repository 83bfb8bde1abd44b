import assert from 'node:assert/strict';
import { functionReady } from '../../lib/run/phases.ts';
import type { ReconcileInput } from '../../lib/fn/types.ts';
import { ended, leftoverFinalizer, reap, reset } from './index.ts';

const ready = {
  metadata: { name: 'f', namespace: 'n' },
  spec: { runtime: 'r' },
  status: {
    ...functionReady({ assignedPod: 'p', assignedPodUID: 'u', attempt: 1 }, 't0', {
      protocol: 'HTTPS' as const,
      url: 'https://p/invoke',
    }),
  },
};

describe('run-reaper on a Ready function Run whose Pod is lost (issue 15)', () => {
  it('retry: back to Pending without the endpoint, Ready=False, next attempt', () => {
    const s = reset(ready, 'PodGone', 'assigned pod is gone', 't1');
    assert.equal(s.phase, 'Pending');
    assert.equal(s.endpoint, undefined);
    assert.equal(s.assignedPod, undefined);
    assert.equal(s.attempt, 2);
    assert.equal(s.conditions?.find((c) => c.type === 'Ready')?.status, 'False');
  });

  it('no retry: Failed without the endpoint, Ready=False', () => {
    const s = ended(ready, 'PodGone', 'assigned pod is gone', 't1');
    assert.equal(s.phase, 'Failed');
    assert.equal('endpoint' in s, false);
    assert.equal(s.conditions?.find((c) => c.type === 'Ready')?.reason, 'PodGone');
  });
});

describe('run-reaper drops the function finalizer a lost Pod left behind (issue 15)', () => {
  const fin = 'kruntimes.io/function-cleanup';
  const pod = { metadata: { name: 'p', namespace: 'n', uid: 'u' } };
  const failed = {
    metadata: { name: 'f', namespace: 'n', finalizers: ['other', fin] },
    spec: { runtime: 'r' },
    status: { ...ended(ready, 'PodGone', 'assigned pod is gone', 't1') },
  };

  it('patches it away (tested entry) when the Run is terminal and its Pod is gone or replaced', () => {
    const op = leftoverFinalizer(failed, undefined);
    assert.deepEqual(op && op.op === 'patch' ? op.patch : undefined, [
      { op: 'test', path: '/metadata/finalizers/1', value: fin },
      { op: 'remove', path: '/metadata/finalizers/1' },
    ]);
    assert.ok(leftoverFinalizer(failed, { metadata: { ...pod.metadata, uid: 'new' } }));
  });

  it('leaves it to runtimed while the Pod lives, and on Runs that are not ending', () => {
    assert.equal(leftoverFinalizer(failed, pod), undefined);
    assert.equal(leftoverFinalizer({ ...failed, status: ready.status }, undefined), undefined);
    assert.equal(
      leftoverFinalizer({ ...failed, metadata: { ...failed.metadata, finalizers: ['other'] } }, undefined),
      undefined,
    );
  });

  it('drops it from a deleted Run that was reset to Pending (no Pod) after a loss', () => {
    const pending = {
      ...failed,
      metadata: { ...failed.metadata, deletionTimestamp: 't2' },
      status: reset(ready, 'PodGone', 'gone', 't1'),
    };
    assert.ok(leftoverFinalizer(pending, undefined));
  });

  it('a reap pass over the namespace: the Failed Run without its Pod gets the patch', () => {
    const runs = [failed];
    const state = {
      list: () => runs,
      get: () => undefined,
    } as unknown as ReconcileInput['state'];
    const ops = reap({ key: 'n/r', state, now: new Date() } as ReconcileInput);
    assert.ok(ops.some((o) => o.op === 'patch' && o.name === 'f'));
  });
});
