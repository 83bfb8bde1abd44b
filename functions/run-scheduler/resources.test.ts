import assert from 'node:assert/strict';
import fc from 'fast-check';
import { fits, formatRequests, parseRequests, podCapacity, podCapacityExact } from './resources.ts';
import { rat } from '../../lib/kube/quantity.ts';
import { capacityAnnotations } from './testing.ts';

describe('run-scheduler resources', () => {
  it('parseRequests keeps positive integers, drops zeros and defaults runs to 1', () => {
    assert.deepEqual(parseRequests(undefined), { ok: true, requests: { runs: 1n } });
    assert.deepEqual(parseRequests({}), { ok: true, requests: { runs: 1n } });
    assert.deepEqual(parseRequests({ runs: '0' }), { ok: true, requests: { runs: 1n } });
    assert.deepEqual(parseRequests({ runs: '3', 'example.com/gpu': '2', cpu: '0' }), {
      ok: true,
      requests: { 'example.com/gpu': 2n, runs: 3n },
    });
    assert.deepEqual(parseRequests({ 'example.com/gpu': '1k' }), {
      ok: true,
      requests: { 'example.com/gpu': 1000n, runs: 1n },
    });
    assert.deepEqual(parseRequests({ 'example.com/mem': '2Ki' }), {
      ok: true,
      requests: { 'example.com/mem': 2048n, runs: 1n },
    });
    assert.deepEqual(parseRequests({ runs: '2000m' }), { ok: true, requests: { runs: 2n } });
    assert.deepEqual(parseRequests({ runs: 2 }), { ok: true, requests: { runs: 2n } });
  });

  it('parseRequests rejects negative, fractional, unparseable and out-of-int64 quantities with the upstream message', () => {
    assert.deepEqual(parseRequests({ runs: '-1' }), {
      ok: false,
      message: 'resource request "runs" must be a non-negative integer',
    });
    assert.deepEqual(parseRequests({ 'example.com/gpu': '0.5' }), {
      ok: false,
      message: 'resource request "example.com/gpu" must be a non-negative integer',
    });
    assert.deepEqual(parseRequests({ 'example.com/gpu': '500m' }), {
      ok: false,
      message: 'resource request "example.com/gpu" must be a non-negative integer',
    });
    assert.deepEqual(parseRequests({ x: 'lots' }), {
      ok: false,
      message: 'resource request "x" must be a non-negative integer',
    });
    assert.deepEqual(parseRequests({ x: '9223372036854775808' }), {
      ok: false,
      message: 'resource request "x" must be a non-negative integer',
    });
    assert.deepEqual(parseRequests({ x: '9223372036854775807' }), {
      ok: true,
      requests: { runs: 1n, x: 9223372036854775807n },
    });
    assert.deepEqual(
      parseRequests({ b: '-1', a: '-1' }),
      { ok: false, message: 'resource request "a" must be a non-negative integer' },
      'first invalid name in sorted order',
    );
  });

  it('parseRequests never throws and always yields runs ≥ 1 with positive values only', () => {
    const value = fc.oneof(
      fc.string(),
      fc.bigInt({ min: -5n, max: 5n }).map(String),
      fc.constantFrom('1k', '1.5', '1Mi', '-0', '0m'),
    );
    fc.assert(
      fc.property(
        fc.dictionary(fc.constantFrom('runs', 'a', 'b', 'example.com/gpu', '__proto__', 'constructor'), value),
        (raw) => {
          const parsed = parseRequests(raw);
          if (!parsed.ok) return;
          assert.ok((parsed.requests.runs ?? 0n) >= 1n);
          for (const v of Object.values(parsed.requests)) assert.ok(v > 0n);
        },
      ),
    );
  });

  it('podCapacity overlays positive capacity annotations on {runs: 2}', () => {
    assert.deepEqual(podCapacity({}), { runs: 2n });
    assert.deepEqual(podCapacity(undefined), { runs: 2n });
    assert.deepEqual(podCapacity({ ...capacityAnnotations({ runs: '5', 'example.com/gpu': '4' }), other: '9' }), {
      'example.com/gpu': 4n,
      runs: 5n,
    });
    assert.deepEqual(
      podCapacity(capacityAnnotations({ runs: '0', gpu: '-1', bad: 'x', '': '3' })),
      { runs: 2n },
      'non-positive, invalid and empty names are ignored',
    );
    assert.deepEqual(
      podCapacity(capacityAnnotations({ gpu: '1500m', half: '0.5', big: '1Ki' })),
      { big: 1024n, gpu: 1n, half: 0n, runs: 2n },
      'fractional capacity is floored',
    );
    assert.deepEqual(podCapacityExact(capacityAnnotations({ gpu: '1500m' })).get('gpu'), rat(3n, 2n));
  });

  it('fits requires every requested resource to be advertised with enough room', () => {
    const cap = podCapacityExact(capacityAnnotations({ runs: '2', gpu: '1500m' }));
    const req = (o: Record<string, bigint>): Map<string, bigint> => new Map(Object.entries(o));
    assert.equal(fits(cap, undefined, req({ runs: 2n })), true);
    assert.equal(fits(cap, new Map([['runs', 1n]]), req({ runs: 2n })), false);
    assert.equal(fits(cap, new Map([['runs', 1n]]), req({ runs: 1n })), true);
    assert.equal(fits(cap, undefined, req({ runs: 1n, gpu: 1n })), true);
    assert.equal(fits(cap, undefined, req({ runs: 1n, gpu: 2n })), false, '2 > 1.5');
    assert.equal(fits(cap, undefined, req({ runs: 1n, tpu: 1n })), false, 'unadvertised resource');
    assert.equal(
      fits(cap, new Map([['tpu', 9n]]), req({ runs: 1n })),
      true,
      'usage of unrequested resources is irrelevant',
    );
    assert.equal(formatRequests(req({ runs: 1n, 'example.com/gpu': 2n })), 'example.com/gpu=2, runs=1');
  });

  it('fits agrees with integer arithmetic on the floored capacity', () => {
    const n = fc.bigInt({ min: 0n, max: 6n });
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6000 }), n, n, (milli, used, asked) => {
        const exact = podCapacityExact(capacityAnnotations({ x: `${milli}m` }));
        const floored = podCapacity(capacityAnnotations({ x: `${milli}m` })).x ?? 0n;
        assert.equal(
          fits(exact, new Map([['x', used]]), new Map([['x', asked]])),
          asked === 0n || used + asked <= floored,
        );
      }),
    );
  });
});
