import assert from 'node:assert/strict';
import { FakeState } from '../../lib/fn/fake-state.ts';
import { R } from '../../lib/fn/resources.ts';
import type { Operation } from '../../lib/fn/types.ts';
import { stableJson } from '../../lib/kube/same-json.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { reconcileWorkflowRun } from './index.ts';

const NOW = new Date('2026-11-29T12:00:00Z');
/** What a read of the object returns: the API server sorts a custom resource's keys. */
const serverOrder = <T>(v: T): T => JSON.parse(stableJson(v)) as T;
const wfr = (status?: object): KubeObject => ({
  metadata: { name: 'ci', namespace: 'ns', uid: 'w1', generation: 1 },
  spec: { jobs: { build: { 'runs-on': 'bash', steps: [{ name: 'a', run: 'echo a' }] } } },
  ...(status ? { status } : {}),
});
const statusOf = (ops: Operation[]): object | undefined =>
  ops.flatMap((o) => (o.op === 'status' ? [(o.object as { status: object }).status] : []))[0];

describe('workflowrun-controller: status writes (issue 17)', () => {
  it('writes no status it already has: reconciles settle once the status is read back in the server order', () => {
    const state = new FakeState([]);
    let status: object | undefined;
    const writes: number[] = [];
    for (let i = 0; i < 6; i++) {
      const ops = reconcileWorkflowRun({ key: 'ns/ci', object: wfr(status), state, now: NOW });
      for (const o of ops)
        if (o.op === 'create') {
          const obj = serverOrder({ ...o.object, metadata: { ...o.object.metadata, namespace: 'ns' } });
          state.put(o.resource, o.resource === R.runs ? { ...obj, status: { phase: 'Running' } } : obj);
        }
      const next = statusOf(ops);
      writes.push(next ? 1 : 0);
      if (next) status = serverOrder(next);
    }
    assert.deepEqual(writes.slice(-2), [0, 0], `status writes per reconcile: ${writes.join(', ')}`);
  });
});
