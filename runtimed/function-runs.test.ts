import assert from 'node:assert/strict';
import { UnsafePathError } from './artifacts/safe-dir.ts';
import { callDecision, registrationFailure } from './function-runs.ts';
import { FunctionRegistrationError } from './runtime-client.ts';
import { PrepareError } from './source.ts';

describe('runtimed function Runs: call decisions and registration failures (issue 15)', () => {
  const fn = { uid: 'u1', ready: true, ended: false, busy: false };
  it('decides 200, 404 (unknown, other UID), 503 (not ready, ending) and 429 (busy)', () => {
    assert.equal(callDecision(fn, 'f', 'u1').code, 200);
    assert.equal(callDecision(undefined, 'f', 'u1').code, 404);
    const other = callDecision(fn, 'f', 'u0');
    assert.equal(other.code, 404);
    assert.match('message' in other ? other.message : '', /recreated/);
    assert.equal(callDecision({ ...fn, ready: false }, 'f', 'u1').code, 503);
    assert.equal(callDecision({ ...fn, ended: true }, 'f', 'u1').code, 503);
    assert.equal(callDecision({ ...fn, busy: true }, 'f', 'u1').code, 429);
  });

  it('registration errors are retryable; unsafe paths and bad inputs are terminal', () => {
    assert.deepEqual(registrationFailure(new FunctionRegistrationError('ModuleNotFoundError')), {
      reason: 'FunctionRegistration',
      message: 'ModuleNotFoundError',
      retryable: true,
    });
    assert.equal(registrationFailure(new PrepareError('git')).reason, 'PrepareSource');
    assert.equal(registrationFailure(new PrepareError('git')).retryable, true);
    assert.equal(registrationFailure(new UnsafePathError('x')).retryable, false);
    assert.equal(
      registrationFailure(Object.assign(new Error('m'), { reason: 'ArtifactInputInvalid' })).retryable,
      false,
    );
    assert.equal(registrationFailure(new Error('socket')).retryable, true);
  });
});
