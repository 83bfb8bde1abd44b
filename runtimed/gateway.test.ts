import { createHash } from 'node:crypto';
import assert from 'node:assert/strict';
import https from 'node:https';
import pino from 'pino';
import { GatewayMetrics } from './gateway-metrics.ts';
import { LazyMetrics } from './lazy-metrics.ts';
import type { KubeClient } from '../lib/kube/client.ts';
import type { CallTarget } from './function-runs.ts';
import {
  INVOCATION_HEADER,
  parseInvokePath,
  requestPath,
  ReviewCache,
  startGateway,
  type Gateway,
  type GatewayDeps,
  type Review,
} from './gateway.ts';
import type { Run } from './types.ts';

const run = { metadata: { name: 'fn', namespace: 'ns', uid: 'u1' }, spec: { runtime: 'r' } } as Run;

function post(
  gw: Gateway,
  path: string,
  body: string,
  token?: string,
): Promise<{ code: number; body: string; id?: string }> {
  const ep = gw.endpoint(run);
  const url = new URL(path, ep.url);
  const ca = Buffer.from(ep.caBundle ?? '', 'base64').toString();
  return new Promise((resolve, reject) => {
    const req = https.request(
      url,
      { method: 'POST', ca, headers: token ? { Authorization: `Bearer ${token}` } : {} },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            code: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString(),
            id: res.headers[INVOCATION_HEADER.toLowerCase()] as string | undefined,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** A gateway on 127.0.0.1 for namespace `ns`, logging nothing, with `deps` for the rest. */
function localGateway(deps: Pick<GatewayDeps, 'target' | 'review'> & Partial<GatewayDeps>): Promise<Gateway> {
  return startGateway({
    address: '127.0.0.1',
    port: 0,
    namespace: 'ns',
    client: {} as KubeClient,
    log: pino({ level: 'silent' }),
    ...deps,
  });
}

describe('runtimed Runtime Gateway (issue 15)', () => {
  let gw: Gateway;
  const reviews: string[] = [];
  let target: CallTarget = { code: 503, message: 'not ready' };
  const metrics = new GatewayMetrics();
  before(async () => {
    gw = await localGateway({
      metrics: LazyMetrics.of(metrics),
      target: () => target,
      review: (token): Promise<Review> => {
        reviews.push(token);
        return Promise.resolve(token === 'good' ? 'allowed' : token === 'other' ? 'denied' : 'unauthenticated');
      },
    });
  });
  after(() => gw.close());
  const path = '/v1/namespaces/ns/runs/fn/u1/invoke';

  it('parses only invoke paths', () => {
    assert.deepEqual(parseInvokePath(path), { namespace: 'ns', name: 'fn', uid: 'u1' });
    assert.equal(parseInvokePath('/v1/namespaces/ns/runs/fn/u1'), undefined);
    assert.equal(parseInvokePath('/v1/namespaces/NS/runs/fn/u1/invoke'), undefined);
  });

  it('takes the path of a request target as URL parsing does, without parsing a plain one', () => {
    const targets = [
      path,
      `${path}?x=1&y=/../z`,
      '/v1/namespaces/ns/runs/fn.v2/u1/invoke',
      '/v1/namespaces/ns/runs/a/b/../u1/invoke',
      '/v1/namespaces/ns/runs/./fn/u1/invoke',
      '/v1/namespaces/ns/runs/fn/u1/invoke/..',
      '/v1/namespaces/ns/runs/f%6E/u1/invoke',
      '/v1/namespaces/ns/runs/fn\\u1/invoke',
      '//host/v1/namespaces/ns/runs/fn/u1/invoke',
      'https://elsewhere/v1/namespaces/ns/runs/fn/u1/invoke?q',
      '/a b/\tc',
      '/..',
      '/...',
      '/a/.b/c.',
      '*',
      '',
    ];
    for (const t of targets) assert.equal(requestPath(t), new URL(t, 'https://gateway').pathname, t);
    assert.equal(parseInvokePath(requestPath('/v1/namespaces/ns/runs/a/b/../u1/invoke'))?.name, 'a');
  });

  it('a call with a cached review takes a body that came with its headers without waiting for its stream events', async () => {
    // `now` is asked as the review is looked up. The tick queued from there runs only once every
    // promise then pending has settled: before the target is asked for only if the gateway waited
    // for a tick (the body's 'data' and 'end' events come on ticks).
    let ticked = false;
    let seen: boolean | undefined;
    const g = await localGateway({
      review: () => Promise.resolve('allowed'),
      now: () => {
        ticked = false;
        queueMicrotask(() => process.nextTick(() => (ticked = true)));
        return Date.now();
      },
      target: () => {
        seen = ticked;
        return { code: 200, run, call: (p) => Promise.resolve({ ok: true, output: JSON.parse(p) as unknown }) };
      },
    });
    try {
      assert.equal((await post(g, path, '{"a": 1}', 'good')).code, 200);
      const cached = await post(g, path, '{"a": 1}', 'good');
      assert.deepEqual([cached.code, cached.body], [200, '{"a":1}']);
      assert.equal(seen, false);
    } finally {
      g.close();
    }
  });

  it('refuses without a token (401), an unknown token (401) and a caller without get (403), before revealing the Run', async () => {
    target = { code: 404, message: 'other UID' };
    assert.equal((await post(gw, path, '{}')).code, 401);
    assert.equal((await post(gw, path, '{}', 'bad')).code, 401);
    assert.equal((await post(gw, path, '{}', 'other')).code, 403);
    assert.equal((await post(gw, '/v1/namespaces/elsewhere/runs/fn/u1/invoke', '{}', 'good')).code, 404);
  });

  it('caches a review per token digest and Run: one review for repeated calls', async () => {
    reviews.length = 0;
    await post(gw, path, '{}', 'good');
    await post(gw, path, '{}', 'good');
    assert.deepEqual(reviews, ['good']);
    await post(gw, '/v1/namespaces/ns/runs/fn2/u1/invoke', '{}', 'good');
    assert.deepEqual(reviews, ['good', 'good']);
  });

  it('passes the target refusal through (404 UID mismatch, 429 busy, 503 not ready)', async () => {
    for (const code of [404, 429, 503] as const) {
      target = { code, message: 'why' };
      assert.equal((await post(gw, path, '{}', 'good')).code, code);
    }
  });

  it('calls with compact JSON, answers the output with an invocation id; function errors are 500', async () => {
    const seen: string[] = [];
    target = {
      code: 200,
      run,
      call: (p) => {
        seen.push(p);
        return Promise.resolve(
          p.includes('fail')
            ? { ok: false, reason: 'FunctionError', error: 'boom' }
            : { ok: true, output: { echo: JSON.parse(p) as unknown } },
        );
      },
    };
    const r = await post(gw, path, '{ "a" :\n 1 }', 'good');
    assert.equal(r.code, 200);
    assert.deepEqual(JSON.parse(r.body), { echo: { a: 1 } });
    assert.match(r.id ?? '', /^[0-9a-f-]{36}$/);
    assert.deepEqual(seen, ['{"a":1}']);
    const f = await post(gw, path, '"fail"', 'good');
    assert.equal(f.code, 500);
    assert.equal((JSON.parse(f.body) as { reason: string }).reason, 'FunctionError');
  });

  it('fails closed: 503 when the API server cannot be asked about the caller, and the function is not called', async () => {
    let called = 0;
    const g = await localGateway({
      target: () => ({ code: 200, run, call: () => Promise.resolve({ ok: true, output: ++called }) }),
      review: () => Promise.reject(new Error('connect ECONNREFUSED')),
    });
    try {
      const r = await post(g, path, '{}', 'good');
      assert.equal(r.code, 503);
      assert.equal((JSON.parse(r.body) as { reason: string }).reason, 'ServiceUnavailable');
      assert.equal(called, 0);
    } finally {
      g.close();
    }
  });

  it('refuses non-JSON (400) and bodies over 1 MiB (413)', async () => {
    assert.equal((await post(gw, path, '{nope', 'good')).code, 400);
    assert.equal((await post(gw, path, `"${'x'.repeat(1 << 20)}"`, 'good')).code, 413);
  });

  it('counts requests by code, their latency and reviews in its metrics; nothing stays in flight', async () => {
    const text = await metrics.registry.metrics();
    const value = (line: string): number => Number(new RegExp(`^${line} (\\S+)$`, 'm').exec(text)?.[1] ?? 'NaN');
    assert.ok(value('kruntimes_gateway_invocations_total{code="200"}') >= 1);
    assert.ok(value('kruntimes_gateway_invocations_total{code="401"}') >= 1);
    assert.ok(value('kruntimes_gateway_invocations_total{code="429"}') >= 1);
    assert.equal(
      value('kruntimes_gateway_invocation_duration_seconds_count{code="200"}'),
      value('kruntimes_gateway_invocations_total{code="200"}'),
    );
    assert.ok(value('kruntimes_gateway_authorization_reviews_total{result="allowed"}') >= 1);
    assert.equal(value('kruntimes_gateway_inflight_requests'), 0);
  });

  it('with metrics not loaded yet (issue 17), counts its first requests exactly once once they load', async () => {
    const lazy = new LazyMetrics();
    const gw2 = await localGateway({
      metrics: lazy,
      target: () => target,
      review: () => Promise.resolve('allowed'),
    });
    try {
      assert.equal(lazy.current, undefined);
      await Promise.all([post(gw2, path, '{}'), post(gw2, path, '{}', 'good')]);
      const text = await (await lazy.load()).registry.metrics();
      assert.match(text, /^kruntimes_gateway_invocations_total\{code="401"\} 1$/m);
      assert.match(text, /^kruntimes_gateway_authorization_reviews_total\{result="allowed"\} 1$/m);
      assert.match(text, /^kruntimes_gateway_inflight_requests 0$/m);
    } finally {
      gw2.close();
    }
  });

  it('keys cached reviews by the token digest, never the token', () => {
    const route = { namespace: 'ns', name: 'fn', uid: 'u' };
    const key = ReviewCache.key('secret-token', route);
    assert.equal(key, `${createHash('sha256').update('secret-token').digest('hex')}/invoke/ns/fn`);
    assert.ok(!key.includes('secret-token'));
    assert.notEqual(ReviewCache.key('secret-token', route, 'session'), key);
  });

  it('expires cached reviews', () => {
    const c = new ReviewCache(1000);
    c.set('k', 'allowed', 0);
    assert.equal(c.get('k', 999), 'allowed');
    assert.equal(c.get('k', 1000), undefined);
  });
});
