import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Readable } from 'node:stream';
import type { KubeClient } from './client.ts';
import { backoffMs, ListWatch } from './watch.ts';
import { ApiError, isApiError } from './errors.ts';
import { errorFromBody } from './client.ts';

describe('lib/kube backoff and errors', () => {
  it('backoff is jittered within [exp/2, exp] and capped', () => {
    fc.assert(
      fc.property(fc.nat(40), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (attempt, r) => {
        const exp = Math.min(30_000, 200 * 2 ** Math.min(attempt, 20));
        const v = backoffMs(attempt, 200, 30_000, () => r);
        assert.ok(v >= Math.floor(exp / 2) && v <= exp, `${v} not in [${exp / 2}, ${exp}]`);
      }),
    );
  });

  it('a watch retries within 5 s of any failure, however many came before (an API server back from a restart is seen at once)', () => {
    fc.assert(
      fc.property(fc.nat(60), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (attempt, r) => {
        assert.ok(backoffMs(attempt, undefined, undefined, () => r) <= 5_000);
      }),
    );
  });

  it('turns a metav1.Status body into a typed ApiError', () => {
    const e = errorFromBody(
      422,
      JSON.stringify({ kind: 'Status', code: 422, reason: 'Invalid', message: 'spec.x: Invalid value' }),
      'POST',
      '/x',
    );
    assert.ok(isApiError(e, 422));
    assert.equal(e.reason, 'Invalid');
    assert.equal(e.message, 'spec.x: Invalid value');
    assert.ok(e.invalid && !e.transient);
  });

  it('classifies transient and terminal codes', () => {
    assert.ok(new ApiError(429, undefined, 'x').transient);
    assert.ok(new ApiError(503, undefined, 'x').transient);
    assert.ok(!new ApiError(404, undefined, 'x').transient);
    assert.equal(errorFromBody(500, 'plain text', 'GET', '/y').message, 'GET /y: HTTP 500: plain text');
  });

  it('a watch that got data again backs off from the start: an API server killed again and again is seen at once each time', async () => {
    // Each watch connection delivers one event, then dies as with a killed API server.
    let rv = 1;
    const client = {
      list: () => Promise.resolve({ items: [], metadata: { resourceVersion: '1' } }),
      stream: () =>
        Promise.resolve(
          Readable.from(
            (function* () {
              rv++;
              yield Buffer.from(
                `${JSON.stringify({ type: 'ADDED', object: { metadata: { name: `o${rv}`, resourceVersion: String(rv) } } })}\n`,
              );
              throw new Error('read ECONNRESET');
            })(),
          ),
        ),
    } as unknown as KubeClient;
    const waits: number[] = [];
    let done: () => void = () => undefined;
    const finished = new Promise<void>((r) => (done = r));
    const lw = new ListWatch(
      client,
      {
        path: '/api/v1/namespaces/ns/configmaps',
        sleep: (ms) => {
          waits.push(ms);
          if (waits.length === 8) done();
          return Promise.resolve();
        },
      },
      () => undefined,
    );
    lw.start();
    await finished;
    lw.stop();
    assert.ok(
      waits.every((ms) => ms <= 200),
      `backoffs grew across reconnects: ${waits.join(', ')}`,
    );
  });
});
