import assert from 'node:assert/strict';
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
});
