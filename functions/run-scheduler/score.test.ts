import assert from 'node:assert/strict';
import fc from 'fast-check';
import { compareLoad, leastLoadedScores, loadKey, normalizeByMaximum, rankCandidates } from './score.ts';
import { podCapacityExact } from './resources.ts';
import { rat } from '../../lib/kube/quantity.ts';
import { capacityAnnotations, pod } from './testing.ts';

const none = { required: [], requiredAnti: [], preferred: [], preferredAnti: [] };

describe('run-scheduler scores', () => {
  it('normalizes preferred scores by the maximum with integer division', () => {
    assert.deepEqual(normalizeByMaximum([0, 0]), [0, 0]);
    assert.deepEqual(normalizeByMaximum([1, 3, 2]), [33, 100, 66]);
    assert.deepEqual(normalizeByMaximum([7]), [100]);
  });

  it('scores LeastLoaded by rank groups', () => {
    const k = (n: bigint, d: bigint): ReturnType<typeof loadKey> => ({ max: rat(n, d), sum: rat(n, d) });
    assert.deepEqual(leastLoadedScores([k(1n, 2n)]), [100]);
    assert.deepEqual(leastLoadedScores([k(1n, 2n), k(1n, 4n), k(1n, 2n)]), [50, 100, 50]);
    assert.deepEqual(leastLoadedScores([k(3n, 4n), k(1n, 4n), k(2n, 4n)]), [0, 100, 50]);
    assert.deepEqual(leastLoadedScores([k(1n, 3n), k(1n, 3n), k(1n, 3n), k(2n, 3n)]), [100, 100, 100, 0]);
  });

  it('computes load keys over every advertised resource with exact ratios', () => {
    const cap = podCapacityExact(capacityAnnotations({ runs: '3', mem: '1500m' }));
    const key = loadKey(
      cap,
      new Map([
        ['runs', 1n],
        ['mem', 1n],
      ]),
      new Map([['runs', 1n]]),
    );
    assert.deepEqual(key, { max: rat(2n, 3n), sum: rat(4n, 3n) }, 'runs 2/3, mem 1/1.5');
    assert.deepEqual(
      loadKey(cap, undefined, new Map([['runs', 1n]])),
      { max: rat(1n, 3n), sum: rat(1n, 3n) },
      'unused resources do not count',
    );
  });

  it('keeps equally loaded Pods tied and breaks the tie by name (upstream TestLeastLoadedScoreKeepsEqualUtilizationTied)', () => {
    const cap = podCapacityExact({});
    const ranked = rankCandidates(
      [
        { pod: pod('pod-b'), capacity: cap, usage: undefined },
        { pod: pod('pod-a'), capacity: cap, usage: undefined },
      ],
      none,
      new Map([['runs', 1n]]),
    );
    assert.deepEqual(
      ranked.map((r) => [r.pod.name, r.total]),
      [
        ['pod-a', 100],
        ['pod-b', 100],
      ],
    );
  });

  it('keeps every score within 0..100 and ranks consistently with load keys', () => {
    const keyArb = fc
      .tuple(fc.integer({ min: 0, max: 20 }), fc.integer({ min: 1, max: 20 }), fc.integer({ min: 0, max: 40 }))
      .map(([n, d, s]) => ({ max: rat(BigInt(n), BigInt(d)), sum: rat(BigInt(n + s), BigInt(d)) }));
    fc.assert(
      fc.property(
        fc.array(keyArb, { minLength: 1, maxLength: 8 }),
        fc.array(fc.nat({ max: 6400 }), { minLength: 1, maxLength: 8 }),
        (keys, raw) => {
          const ll = leastLoadedScores(keys);
          for (const s of [...ll, ...normalizeByMaximum(raw)]) assert.ok(Number.isInteger(s) && s >= 0 && s <= 100);
          keys.forEach((a, i) =>
            keys.forEach((b, j) => {
              const c = compareLoad(a, b);
              if (c < 0) assert.ok((ll[i] ?? 0) > (ll[j] ?? 0));
              if (c === 0) assert.equal(ll[i], ll[j]);
            }),
          );
        },
      ),
    );
  });
});
