import assert from 'node:assert/strict';
import { reconcileEcho } from './index.ts';
import { sweepExpired } from '../sample-sweep/index.ts';
import type { State } from '../../lib/fn/types.ts';

const noState: State = { get: () => undefined, list: () => [] };

describe('sample functions', () => {
  it('sample-echo applies an owned copy and does nothing for deleted objects', () => {
    const ops = reconcileEcho({
      key: 'ns/a',
      now: new Date(0),
      state: noState,
      object: { metadata: { name: 'a', namespace: 'ns', uid: 'u' }, data: { k: 'v' } },
    });
    assert.equal(ops.length, 1);
    const op = ops[0] as unknown as {
      op: string;
      object: { metadata: { name: string; ownerReferences: { uid: string }[] }; data: unknown };
    };
    assert.equal(op.op, 'apply');
    assert.equal(op.object.metadata.name, 'a-echo');
    assert.equal(op.object.metadata.ownerReferences[0]?.uid, 'u');
    assert.deepEqual(op.object.data, { k: 'v' });
    assert.deepEqual(reconcileEcho({ key: 'ns/a', now: new Date(0), state: noState, object: undefined }), []);
  });

  it('sample-sweep deletes only expired objects, with a UID precondition', () => {
    const items = [
      {
        metadata: {
          name: 'old',
          namespace: 'n',
          uid: '1',
          annotations: { 'kruntimes.io/expires-at': '2026-01-01T00:00:00Z' },
        },
      },
      {
        metadata: {
          name: 'new',
          namespace: 'n',
          uid: '2',
          annotations: { 'kruntimes.io/expires-at': '2027-01-01T00:00:00Z' },
        },
      },
      { metadata: { name: 'bad', namespace: 'n', uid: '3', annotations: { 'kruntimes.io/expires-at': 'never' } } },
    ];
    const ops = sweepExpired({
      now: new Date('2026-06-01T00:00:00Z'),
      state: { get: () => undefined, list: () => items },
    });
    assert.deepEqual(ops, [
      {
        op: 'delete',
        resource: ops[0] && 'resource' in ops[0] ? ops[0].resource : undefined,
        namespace: 'n',
        name: 'old',
        uid: '1',
      },
    ]);
  });
});
