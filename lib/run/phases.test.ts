import assert from 'node:assert/strict';
import { getCondition } from './conditions.ts';
import { claimed, functionEnded, functionReady, phaseFor, retryScheduled } from './phases.ts';
import { shouldRetry } from './retry.ts';

const endpoint = { protocol: 'HTTPS' as const, url: 'https://10.0.0.1:9096/v1/namespaces/n/runs/f/u/invoke' };

describe('lib/run function-mode transitions (issue 15)', () => {
  it('Running -> Ready: FunctionRegistered, the endpoint set, attempt kept', () => {
    const running = claimed({ phase: 'Scheduled', assignedPod: 'p' }, 't0', 3);
    const ready = functionReady({ ...running, attempt: 2 }, 't1', endpoint, 3);
    assert.equal(ready.phase, 'Ready');
    assert.equal(ready.attempt, 2);
    assert.deepEqual(ready.endpoint, endpoint);
    const c = getCondition(ready.conditions, 'Ready');
    assert.equal(c?.status, 'True');
    assert.equal(c?.reason, 'FunctionRegistered');
    assert.equal(c?.observedGeneration, 3);
    assert.equal(ready.startTime, 't0');
    assert.equal(ready.completionTime, undefined);
  });

  it('idle timeout ends in phase Timeout with reason IdleTimeout; cancel in Cancelled; the endpoint is removed', () => {
    const ready = functionReady(claimed({}, 't0'), 't1', endpoint);
    const idle = functionEnded(ready, 't2', 'IdleTimeout', 'no call for 5s');
    assert.equal(idle.phase, 'Timeout');
    assert.equal(idle.endpoint, null);
    assert.equal(getCondition(idle.conditions, 'Ready')?.reason, 'IdleTimeout');
    assert.equal(getCondition(idle.conditions, 'Ready')?.status, 'False');
    assert.equal(getCondition(idle.conditions, 'Completed')?.reason, 'IdleTimeout');
    assert.equal(idle.completionTime, 't2');
    assert.equal(functionEnded(ready, 't2', 'Timeout', 'x').phase, 'Timeout');
    assert.equal(functionEnded(ready, 't2', 'Cancelled', 'x').phase, 'Cancelled');
    assert.equal(functionEnded(ready, 't2', 'FunctionRegistration', 'x').phase, 'Failed');
    assert.equal(phaseFor('IdleTimeout'), 'Timeout');
  });

  it('a registration error is retried per the policy (attempt counts registrations), then Failed', () => {
    const policy = { maxAttempts: 2 };
    const first = claimed({}, 't0');
    assert.equal(shouldRetry(policy, first.attempt ?? 1, 'FunctionRegistration'), true);
    const second = retryScheduled(first, 't1', 'FunctionRegistration', 'ModuleNotFoundError');
    assert.equal(second.attempt, 2);
    assert.equal(second.phase, 'Running');
    assert.equal(shouldRetry(policy, second.attempt ?? 1, 'FunctionRegistration'), false);
    assert.equal(functionEnded(second, 't2', 'FunctionRegistration', 'm').phase, 'Failed');
  });
});
