import assert from 'node:assert/strict';
import { roundOrder } from './stats.ts';

describe('bench stats: roundOrder', () => {
  it('keeps the order as given unless rotating', () => {
    assert.deepEqual(roundOrder(['a', 'b', 'c'], 5, false), ['a', 'b', 'c']);
  });

  it('rotating, starts each round one measure later, so each takes every place in turn', () => {
    const rounds = [0, 1, 2, 3].map((i) => roundOrder(['a', 'b', 'c'], i, true).join(''));
    assert.deepEqual(rounds, ['abc', 'bca', 'cab', 'abc']);
    assert.deepEqual(roundOrder([], 3, true), []);
  });
});
