import assert from 'node:assert/strict';
import { ApiError } from './errors.ts';
import { retriable, untilAnswered } from './retry.ts';

const refused = (): Error => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' });

describe('lib/kube/retry: waiting out an API server outage', () => {
  it('retries no answer, 429 and 5xx; never a definite answer', () => {
    assert.equal(retriable(refused()), true);
    assert.equal(retriable(Object.assign(new Error('x'), { code: 'ECONNRESET' })), true);
    assert.equal(retriable(new Error('socket hang up')), true);
    assert.equal(retriable(new ApiError(503, undefined, 'not ready')), true);
    assert.equal(retriable(new ApiError(429, undefined, 'slow down')), true);
    for (const code of [400, 403, 404, 409, 422]) assert.equal(retriable(new ApiError(code, undefined, 'no')), false);
    assert.equal(retriable(new Error('something else')), false);
  });

  it('answers once the server is back, backing off up to the cap', async () => {
    const slept: number[] = [];
    let calls = 0;
    const r = await untilAnswered(
      () => {
        calls++;
        if (calls <= 6) return Promise.reject(calls % 2 ? refused() : new ApiError(503, undefined, 'x'));
        return Promise.resolve('written');
      },
      { baseMs: 100, maxMs: 1_000, sleep: (ms) => (slept.push(ms), Promise.resolve()) },
    );
    assert.equal(r, 'written');
    assert.deepEqual(slept, [100, 200, 400, 800, 1_000, 1_000]);
  });

  it('fails at once on a definite answer, and when told to stop', async () => {
    let calls = 0;
    await assert.rejects(
      untilAnswered(() => (calls++, Promise.reject(new ApiError(409, undefined, 'conflict'))), {
        sleep: () => Promise.resolve(),
      }),
      (e: unknown) => e instanceof ApiError && e.code === 409,
    );
    assert.equal(calls, 1);
    let stop = false;
    await assert.rejects(
      untilAnswered(() => ((stop = true), Promise.reject(refused())), {
        stop: () => stop,
        sleep: () => Promise.resolve(),
      }),
      /ECONNREFUSED/,
    );
  });
});
