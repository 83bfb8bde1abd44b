import assert from 'node:assert/strict';
import { ApiError } from '../../lib/kube/errors.ts';
import { waitingToStart } from './logs.ts';

const apiError = (code: number, message: string): ApiError =>
  new ApiError(code, { kind: 'Status', code, message, reason: code === 400 ? 'BadRequest' : 'Conflict' }, message);

describe('krt logs: which answers mean "wait"', () => {
  it('waits on 400 "is waiting to start" (unassigned Run, runtimed not started)', () => {
    assert.equal(
      waitingToStart(apiError(400, 'Run ns/a is waiting to start: not assigned to a Runtime Pod yet')),
      true,
    );
  });
  it('never waits on 409 (the Runtime Pod is gone) or another 400', () => {
    assert.equal(waitingToStart(apiError(409, 'the Runtime Pod p no longer exists; its logs are gone with it')), false);
    assert.equal(waitingToStart(apiError(409, 'Run ns/a is waiting to start')), false);
    assert.equal(waitingToStart(apiError(400, 'cursor is not a cursor returned by this API')), false);
    assert.equal(waitingToStart(new Error('is waiting to start')), false);
  });
});
