import assert from 'node:assert/strict';
import fc from 'fast-check';
import { sameJson, stableJson } from './same-json.ts';

describe('sameJson (change detection for API objects)', () => {
  it('ignores key order at every depth and undefined members, as the API server serialises them', () => {
    const built = { phase: 'Bound', conditions: [{ type: 'Bound', status: 'True', message: 'm' }], gone: undefined };
    const served = { conditions: [{ message: 'm', status: 'True', type: 'Bound' }], phase: 'Bound' };
    assert.notEqual(JSON.stringify(built), JSON.stringify(served));
    assert.ok(sameJson(built, served));
    assert.equal(stableJson(built), stableJson(served));
  });

  it('still sees a changed value, a reordered list and a member that appeared', () => {
    assert.ok(!sameJson({ a: 1 }, { a: 2 }));
    assert.ok(!sameJson({ l: [1, 2] }, { l: [2, 1] }));
    assert.ok(!sameJson({ a: 1 }, { a: 1, b: null }));
    assert.ok(!sameJson(undefined, {}));
  });

  it('says what comparing the stableJson of both says, for any JSON values and reordered copies', () => {
    const reordered = (v: unknown, flip: boolean): unknown => {
      if (Array.isArray(v)) return v.map((x) => reordered(x, flip));
      if (!v || typeof v !== 'object') return v;
      const entries = Object.entries(v).map(([k, x]) => [k, reordered(x, flip)] as const);
      return Object.fromEntries(flip ? entries.reverse() : entries);
    };
    const json = fc.jsonValue({ maxDepth: 4 });
    fc.assert(
      fc.property(json, json, fc.boolean(), (a, b, flip) => {
        assert.equal(sameJson(a, b), stableJson(a) === stableJson(b));
        assert.ok(sameJson(a, reordered(a, flip)));
      }),
      { numRuns: 500 },
    );
  });

  it('leaves out undefined members on either side and reads an undefined list item as null', () => {
    assert.ok(sameJson({ a: 1, b: undefined }, { a: 1 }));
    assert.ok(sameJson({ a: 1 }, { c: undefined, a: 1 }));
    assert.ok(!sameJson({ a: undefined }, { b: 1 }));
    assert.ok(sameJson([undefined, 1], [null, 1]));
    assert.ok(!sameJson([1], { 0: 1 }));
    assert.ok(!sameJson({}, []));
    assert.ok(!sameJson(null, {}));
  });
});
