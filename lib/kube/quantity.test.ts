import assert from 'node:assert/strict';
import fc from 'fast-check';
import { add, cmp, div, floor, parseQuantity, rat } from './quantity.ts';

const q = (s: string | number): string => {
  const r = parseQuantity(s);
  return r ? `${r.n}/${r.d}` : 'invalid';
};

describe('run-scheduler quantity', () => {
  it('parses the Kubernetes quantity grammar exactly', () => {
    assert.equal(q('2'), '2/1');
    assert.equal(q('+3'), '3/1');
    assert.equal(q('-1'), '-1/1');
    assert.equal(q('0'), '0/1');
    assert.equal(q('1.5'), '3/2');
    assert.equal(q('.5'), '1/2');
    assert.equal(q('2.'), '2/1');
    assert.equal(q('1000m'), '1/1');
    assert.equal(q('500m'), '1/2');
    assert.equal(q('1k'), '1000/1');
    assert.equal(q('0.5k'), '500/1');
    assert.equal(q('2M'), '2000000/1');
    assert.equal(q('1E'), '1000000000000000000/1');
    assert.equal(q('1Ki'), '1024/1');
    assert.equal(q('1.5Ki'), '1536/1');
    assert.equal(q('1Ei'), `${2n ** 60n}/1`);
    assert.equal(q('1e3'), '1000/1');
    assert.equal(q('12E-1'), '6/5');
    assert.equal(q(' 7 '), '7/1');
    assert.equal(q(3), '3/1');
    assert.equal(q(0.25), '1/4');
  });

  it('rejects text that is not a quantity', () => {
    for (const bad of [
      '',
      ' ',
      'abc',
      '1.2.3',
      '1KB',
      '1ki',
      '--1',
      '.',
      '1e',
      '1 k',
      'e3',
      '1e999',
      'Infinity',
      '0x10',
      NaN,
      Infinity,
    ]) {
      assert.equal(parseQuantity(bad), undefined, String(bad));
    }
  });

  it('does exact rational arithmetic', () => {
    assert.deepEqual(rat(6n, -4n), { n: -3n, d: 2n });
    assert.deepEqual(add(rat(1n, 3n), rat(1n, 6n)), { n: 1n, d: 2n });
    assert.deepEqual(div(rat(3n), rat(4n)), { n: 3n, d: 4n });
    assert.equal(cmp(rat(1n, 3n), rat(2n, 6n)), 0);
    assert.equal(cmp(rat(1n, 3n), rat(1n, 2n)), -1);
    assert.equal(floor(rat(7n, 2n)), 3n);
    assert.equal(floor(rat(-7n, 2n)), -4n);
    assert.throws(() => rat(1n, 0n), RangeError);
  });

  it('parses every decimal integer to itself, and a/10^k with its exact value', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }), fc.integer({ min: 0, max: 6 }), (n, k) => {
        assert.deepEqual(parseQuantity(n.toString()), rat(n));
        const digits = (n < 0n ? -n : n).toString().padStart(k + 1, '0');
        const text = `${n < 0n ? '-' : ''}${digits.slice(0, digits.length - k)}${k ? `.${digits.slice(digits.length - k)}` : ''}`;
        assert.equal(cmp(parseQuantity(text) ?? rat(99n), rat(n, 10n ** BigInt(k))), 0);
      }),
    );
  });

  it('orders rationals consistently with their cross products', () => {
    const r = fc
      .tuple(fc.bigInt({ min: -1000n, max: 1000n }), fc.bigInt({ min: 1n, max: 1000n }))
      .map(([n, d]) => rat(n, d));
    fc.assert(
      fc.property(r, r, r, (a, b, c) => {
        assert.equal(cmp(a, b) + cmp(b, a), 0);
        if (cmp(a, b) <= 0 && cmp(b, c) <= 0) assert.ok(cmp(a, c) <= 0);
        assert.equal(cmp(add(a, c), add(b, c)), cmp(a, b));
      }),
    );
  });
});
