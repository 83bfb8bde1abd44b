import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Store, objectKey } from './cache.ts';
import type { KubeObject, WatchEvent } from './types.ts';

type Op = { kind: 'put'; name: string } | { kind: 'del'; name: string } | { kind: 'relist' } | { kind: 'drop' };

/** Simulates a server and a client that sees events, may miss some (dropped connection), and relists. */
function simulate(ops: Op[]): { server: Map<string, KubeObject>; store: Store<KubeObject>; deltas: number } {
  const server = new Map<string, KubeObject>();
  const store = new Store<KubeObject>();
  let rv = 0;
  let connected = true;
  let deltas = 0;
  const deliver = (ev: WatchEvent): void => {
    if (connected && store.apply(ev)) deltas++;
  };
  for (const op of ops) {
    if (op.kind === 'put') {
      const obj: KubeObject = { metadata: { name: op.name, namespace: 'ns', resourceVersion: String(++rv) } };
      const existed = server.has(op.name);
      server.set(op.name, obj);
      deliver({ type: existed ? 'MODIFIED' : 'ADDED', object: obj });
    } else if (op.kind === 'del') {
      const old = server.get(op.name);
      if (!old) continue;
      server.delete(op.name);
      deliver({ type: 'DELETED', object: { metadata: { ...old.metadata, resourceVersion: String(++rv) } } });
    } else if (op.kind === 'drop') {
      connected = false;
    } else {
      deltas += store.replace([...server.values()]).length;
      connected = true;
    }
  }
  deltas += store.replace([...server.values()]).length;
  return { server, store, deltas };
}

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('put' as const), name: fc.constantFrom('a', 'b', 'c', 'd') }),
  fc.record({ kind: fc.constant('del' as const), name: fc.constantFrom('a', 'b', 'c', 'd') }),
  fc.constant({ kind: 'relist' as const }),
  fc.constant({ kind: 'drop' as const }),
);

describe('lib/kube Store (list/watch merge)', () => {
  it('converges to the server state for any interleaving of events, missed events and relists', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 60 }), (ops) => {
        const { server, store } = simulate(ops);
        assert.deepEqual(store.keys().sort(), [...server.keys()].map((n) => `ns/${n}`).sort());
        for (const [n, obj] of server)
          assert.equal(store.get(`ns/${n}`)?.metadata.resourceVersion, obj.metadata.resourceVersion);
      }),
      { numRuns: 500 },
    );
  });

  it('reports a relist that removes vanished objects as deletions', () => {
    const s = new Store<KubeObject>();
    s.apply({ type: 'ADDED', object: { metadata: { name: 'x', resourceVersion: '1' } } });
    const d = s.replace([]);
    assert.deepEqual(
      d.map((x) => x.type),
      ['deleted'],
    );
    assert.equal(s.size, 0);
  });

  it('ignores an event that does not change the resourceVersion, and bookmarks', () => {
    const s = new Store<KubeObject>();
    const o = { metadata: { name: 'x', resourceVersion: '5' } };
    assert.equal(s.apply({ type: 'ADDED', object: o })?.type, 'added');
    assert.equal(s.apply({ type: 'MODIFIED', object: o }), undefined);
    assert.equal(s.apply({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '9' } } }), undefined);
    assert.equal(objectKey({ metadata: { name: 'n' } }), 'n');
  });
});
