import assert from 'node:assert/strict';
import type { KubeObject } from '../kube/types.ts';
import { heartbeatOnly } from './heartbeat.ts';
import { runtimePod, T0 } from './heartbeat-fixtures.ts';

const updated = (old: KubeObject, object: KubeObject): { type: 'updated'; old: KubeObject; object: KubeObject } => ({
  type: 'updated' as const,
  old,
  object,
});

describe('runtimed heartbeat updates (issue 17)', () => {
  it('an update that only renews a fresh heartbeat is heartbeat-only', () => {
    assert.equal(heartbeatOnly(updated(runtimePod(T0, '1'), runtimePod(T0 + 5000, '2')), T0 + 5100, 15_000), true);
  });

  it('a heartbeat that replaces one already stale when it arrives is not: the Pod may have been judged stale', () => {
    assert.equal(heartbeatOnly(updated(runtimePod(T0, '1'), runtimePod(T0 + 20_000, '2')), T0 + 20_100, 15_000), false);
    // The same beats, but the update arrives late: the old heartbeat is stale by then.
    assert.equal(heartbeatOnly(updated(runtimePod(T0, '1'), runtimePod(T0 + 5000, '2')), T0 + 15_000, 15_000), false);
  });

  it('any other change is not heartbeat-only (Ready, labels), nor an add, a delete or an unchanged heartbeat', () => {
    const old = runtimePod(T0, '1');
    const now = T0 + 5100;
    assert.equal(heartbeatOnly(updated(old, runtimePod(T0 + 5000, '2', { ready: 'False' })), now, 15_000), false);
    assert.equal(heartbeatOnly(updated(old, runtimePod(T0 + 5000, '2', { labels: { a: 'b' } })), now, 15_000), false);
    assert.equal(heartbeatOnly({ type: 'added', object: runtimePod(T0, '1') }, now, 15_000), false);
    assert.equal(heartbeatOnly({ type: 'deleted', object: old, old }, now, 15_000), false);
    assert.equal(heartbeatOnly(updated(old, runtimePod(T0, '2')), now, 15_000), false);
    const noBeat = { ...old, status: { phase: 'Running' } } as KubeObject;
    assert.equal(heartbeatOnly(updated(noBeat, runtimePod(T0, '2')), now, 15_000), false);
  });

  it('serialises an update once however many triggers judge it (the scheduler and the reaper share the event)', () => {
    const reads = { n: 0 };
    const spied = (p: KubeObject): KubeObject => {
      const { spec, ...rest } = p as KubeObject & { spec?: unknown };
      return Object.defineProperty<KubeObject>(rest, 'spec', {
        enumerable: true,
        get: () => (reads.n++, spec),
      });
    };
    const e = updated(spied(runtimePod(T0, '1')), spied(runtimePod(T0 + 5000, '2')));
    assert.equal(heartbeatOnly(e, T0 + 5100, 15_000), true);
    const once = reads.n;
    assert.ok(once > 0);
    assert.equal(heartbeatOnly(e, T0 + 5100, 30_000), true);
    assert.equal(reads.n, once, 'the second trigger re-serialised both versions');
    // A different old version of the same object is compared afresh.
    assert.equal(heartbeatOnly(updated(runtimePod(T0, '0', { ready: 'False' }), e.object), T0 + 5100, 15_000), false);
  });
});
