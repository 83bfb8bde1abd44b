import assert from 'node:assert/strict';
import { ApiError } from '../../lib/kube/errors.ts';
import { assignedPod, gonePod, HttpError, type RunObj } from './handler.ts';

const run = (status?: RunObj['status']): RunObj => ({
  apiVersion: 'kruntimes.io/v1alpha1',
  kind: 'Run',
  metadata: { name: 'a', namespace: 'ns' },
  ...(status ? { status } : {}),
});
const apiError = (code: number, message: string): ApiError => new ApiError(code, { code, message }, message);

describe('logs: status codes (409 only for a gone Runtime Pod)', () => {
  it('an unassigned Run is 400 BadRequest "is waiting to start", never 409', () => {
    for (const r of [run(), run({ phase: 'Pending' })]) {
      assert.throws(
        () => assignedPod(r, 'ns', 'a'),
        (e: unknown) =>
          e instanceof HttpError &&
          e.code === 400 &&
          e.reason === 'BadRequest' &&
          /^Run ns\/a is waiting to start: not assigned to a Runtime Pod yet \(phase Pending\)/.test(e.message),
      );
    }
  });

  it('an assigned Run reads its Runtime Pod', () => {
    assert.equal(assignedPod(run({ phase: 'Running', assignedPod: 'rt-1' }), 'ns', 'a'), 'rt-1');
  });

  it('a Pod log read answered 404 (Pod gone) is 409 Conflict', () => {
    const e = gonePod(apiError(404, 'pods "rt-1" not found'), 'ns', 'a', 'rt-1');
    assert.ok(e instanceof HttpError);
    assert.deepEqual([e.code, e.reason], [409, 'Conflict']);
    assert.match(e.message, /Runtime Pod rt-1 that ran Run ns\/a no longer exists/);
  });

  it('a Pod log read answered 400 (container waiting) stays 400, retryable', () => {
    const k8s = 'container "runtimed" in pod "rt-1" is waiting to start: ContainerCreating';
    const e = gonePod(apiError(400, k8s), 'ns', 'a', 'rt-1');
    assert.ok(e instanceof HttpError);
    assert.deepEqual([e.code, e.reason], [400, 'BadRequest']);
    assert.match(e.message, /is waiting to start/);
  });

  it('other failures pass through unchanged', () => {
    const err = apiError(500, 'etcd timeout');
    assert.equal(gonePod(err, 'ns', 'a', 'rt-1'), err);
  });
});
