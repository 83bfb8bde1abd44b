/**
 * The relay's read side (issue 17): indexes by IgnoreDecl.readBy keep a scheduler or reaper
 * invocation's reads independent of the namespace's finished Runs, and answer exactly what a
 * full list without the ignored objects answers.
 */
import assert from 'node:assert/strict';
import { Store } from '../lib/kube/cache.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { FakeState } from '../lib/fn/fake-state.ts';
import { handlerState } from '../lib/fn/ignore.ts';
import { R } from '../lib/fn/resources.ts';
import type { IgnoreDecl, Operation, WatchFunction } from '../lib/fn/types.ts';
import reaper, { FUNCTION_FINALIZER } from '../functions/run-reaper/index.ts';
import scheduler from '../functions/run-scheduler/index.ts';
import workspaces from '../functions/workspace-controller/index.ts';
import artifactGc, { FINALIZER as GC_FINALIZER } from '../functions/run-artifact-gc/index.ts';
import { KeyIndex, RelayCache } from './relay-cache.ts';

const NOW = new Date('2026-12-01T20:30:00Z');
const T = '2026-12-01T20:29:59Z';
const PHASES = ['Pending', 'Scheduled', 'Running', 'Ready', 'Succeeded', 'Failed', 'Timeout', 'Cancelled'];

let rv = 1;
function run(
  name: string,
  phase: string,
  o: { runtime?: string; ns?: string; pod?: string; fin?: boolean } = {},
): KubeObject {
  return {
    metadata: {
      name,
      namespace: o.ns ?? 'ns',
      uid: `uid-${name}`,
      resourceVersion: String(rv++),
      creationTimestamp: T,
      ...(o.fin ? { finalizers: [FUNCTION_FINALIZER] } : {}),
    },
    spec: { runtime: o.runtime ?? 'bash', mode: { task: { args: ['echo'] } } },
    status: {
      phase,
      ...(o.pod ? { assignedPod: o.pod, assignedPodUID: `uid-${o.pod}` } : {}),
      ...(['Succeeded', 'Failed'].includes(phase) ? { completionTime: T } : {}),
    },
  };
}

const pod = (name: string): KubeObject => ({
  metadata: { name, namespace: 'ns', uid: `uid-${name}`, resourceVersion: '1', labels: { runtime: 'bash' } },
  spec: { nodeName: 'n1' },
  status: {
    phase: 'Running',
    conditions: [
      { type: 'Ready', status: 'True' },
      { type: 'kruntimes.io/RuntimedReady', status: 'True', lastProbeTime: T },
    ],
  },
});

/** A relay cache with one informer store per kind, fed like the relay feeds it (apply, then changed). */
type Put = (r: typeof R.runs, o: KubeObject, type?: 'ADDED' | 'MODIFIED' | 'DELETED') => void;
function cacheOf(fns: WatchFunction[], items: [typeof R.runs, KubeObject][]): { cache: RelayCache; put: Put } {
  const cache = new RelayCache(fns);
  const stores = new Map<string, Store<KubeObject>>();
  const put: Put = (r, o, type = 'ADDED') => {
    let s = stores.get(r.resource);
    if (!s) {
      stores.set(r.resource, (s = new Store<KubeObject>()));
      cache.add(r, { store: s });
    }
    if (s.apply({ type, object: o })) cache.changed(r, o);
  };
  for (const [r, o] of items) put(r, o);
  return { cache, put };
}

/** The function with its `when` counted (its readBy is the same function, so the relay's index still applies). */
function counted(fn: WatchFunction): { fn: WatchFunction; calls: () => number } {
  let n = 0;
  const ignore: IgnoreDecl[] = (fn.trigger.ignore ?? []).map((d) => ({
    ...d,
    when: (o, key) => {
      n++;
      return d.when(o, key);
    },
  }));
  return { fn: { ...fn, trigger: { ...fn.trigger, ignore } }, calls: () => n };
}

const names = (l: KubeObject[]): string[] => l.map((o) => o.metadata.name ?? '').sort();
const sortOps = (ops: Operation[]): string[] => ops.map((o) => JSON.stringify(o)).sort();

describe('KeyIndex', () => {
  const by = (o: KubeObject): string[] => (o.metadata.labels?.k ? [o.metadata.labels.k] : []);
  const obj = (k?: string): KubeObject => ({ metadata: { name: 'a', namespace: 'ns', labels: k ? { k } : {} } });

  it('follows an object from value to value and out when it is gone or maps to none', () => {
    const i = new KeyIndex(by);
    i.update('ns/a', obj('x'));
    assert.deepEqual(i.keys('x'), ['ns/a']);
    i.update('ns/a', obj('y'));
    assert.deepEqual([i.keys('x'), i.keys('y')], [[], ['ns/a']]);
    i.update('ns/a', obj());
    assert.deepEqual(i.keys('y'), []);
    i.update('ns/a', obj('y'));
    i.update('ns/a', undefined);
    assert.deepEqual(i.keys('y'), []);
  });
});

describe('RelayCache', () => {
  it('indexes the newest copy over several informers of a kind; a delete in one keeps what another holds', () => {
    const fn = scheduler as WatchFunction;
    const readBy = fn.trigger.ignore![0]!.readBy!;
    const cache = new RelayCache([fn]);
    const a = new Store<KubeObject>();
    const b = new Store<KubeObject>();
    cache.add(R.runs, { store: a });
    cache.add(R.runs, { store: b });
    const pending = run('r', 'Pending');
    const done = { ...run('r', 'Succeeded'), metadata: { ...pending.metadata, resourceVersion: '999999' } };
    a.apply({ type: 'ADDED', object: pending });
    cache.changed(R.runs, pending);
    b.apply({ type: 'ADDED', object: done });
    cache.changed(R.runs, done);
    assert.deepEqual(cache.state.indexed!(R.runs, readBy, 'ns/bash'), [], 'the newer copy is finished');
    b.apply({ type: 'DELETED', object: done });
    cache.changed(R.runs, done);
    assert.deepEqual(names(cache.state.indexed!(R.runs, readBy, 'ns/bash')!), ['r'], 'informer a still holds it');
    a.apply({ type: 'DELETED', object: pending });
    cache.changed(R.runs, pending);
    assert.deepEqual(cache.state.indexed!(R.runs, readBy, 'ns/bash'), []);
    assert.equal(
      cache.state.indexed!(R.runs, () => [], 'ns/bash'),
      undefined,
      'an undeclared index is no index',
    );
  });
});

describe('RelayCache list over several informers', () => {
  it('answers each object by its newest copy: an older copy that matches never stands in for it', () => {
    const cache = new RelayCache();
    const a = new Store<KubeObject>();
    const b = new Store<KubeObject>();
    cache.add(R.runs, { store: a });
    cache.add(R.runs, { store: b });
    const v = (name: string, rv: string, label: string): KubeObject => ({
      metadata: { name, namespace: 'ns', resourceVersion: rv, labels: { k: label } },
    });
    a.apply({ type: 'ADDED', object: v('x', '5', 'yes') });
    b.apply({ type: 'ADDED', object: v('x', '9', 'no') });
    a.apply({ type: 'ADDED', object: v('y', '9', 'yes') });
    b.apply({ type: 'ADDED', object: v('y', '5', 'no') });
    b.apply({ type: 'ADDED', object: v('z', '1', 'yes') });
    const got = cache.state.list(R.runs, 'ns', { k: 'yes' });
    assert.deepEqual(got.map((o) => `${o.metadata.name ?? ''}@${o.metadata.resourceVersion ?? ''}`).sort(), [
      'y@9',
      'z@1',
    ]);
    assert.deepEqual(names(cache.state.list(R.runs, 'other')), []);
    assert.deepEqual(names(cache.state.list(R.runs)), ['x', 'y', 'z']);
  });
});

describe('RelayCache label index (issue 17)', () => {
  /** A store that counts full listings. */
  class CountingStore extends Store<KubeObject> {
    lists = 0;
    override list(): KubeObject[] {
      this.lists++;
      return super.list();
    }
  }

  /** What a scan answers: each key's newest copy over the stores, if it matches. */
  function scan(stores: Store<KubeObject>[], ns: string, sel: Record<string, string>): string[] {
    const best = new Map<string, KubeObject>();
    for (const s of stores)
      for (const o of s.list()) {
        const k = `${o.metadata.namespace ?? ''}/${o.metadata.name ?? ''}`;
        const b = best.get(k);
        if (!b || Number(o.metadata.resourceVersion) > Number(b.metadata.resourceVersion)) best.set(k, o);
      }
    return [...best.values()]
      .filter((o) => o.metadata.namespace === ns && Object.entries(sel).every(([k, v]) => o.metadata.labels?.[k] === v))
      .map((o) => `${o.metadata.name ?? ''}@${o.metadata.resourceVersion ?? ''}`)
      .sort();
  }

  it('answers a namespaced labeled list from the index, never listing a store, exactly as a scan would', () => {
    const cache = new RelayCache();
    const stores = [new CountingStore(), new CountingStore()];
    cache.add(R.runs, { store: stores[0]! });
    let seed = 7;
    const rnd = (n: number): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
    let version = 1;
    const sels: Record<string, string>[] = [{ wf: 'a' }, { wf: 'b' }, { wf: 'a', job: 'x' }, { job: 'x' }];
    for (let step = 0; step < 3000; step++) {
      if (step === 40) cache.add(R.runs, { store: stores[1]! });
      const s = stores[step < 40 ? 0 : rnd(2)]!;
      const name = `r${rnd(30)}`;
      const ns = ['ns', 'other'][rnd(2)]!;
      const labels: Record<string, string> = {};
      if (rnd(3)) labels.wf = ['a', 'b'][rnd(2)]!;
      if (rnd(2)) labels.job = ['x', 'y'][rnd(2)]!;
      const o: KubeObject = { metadata: { name, namespace: ns, resourceVersion: String(version++), labels } };
      const type = rnd(5) === 0 ? 'DELETED' : 'MODIFIED';
      if (s.apply({ type, object: o })) cache.changed(R.runs, o);
      const sel = sels[rnd(sels.length)]!;
      const before = stores.map((x) => x.lists);
      const got = cache.state
        .list(R.runs, ns, sel)
        .map((x) => `${x.metadata.name ?? ''}@${x.metadata.resourceVersion ?? ''}`)
        .sort();
      assert.deepEqual(
        stores.map((x) => x.lists),
        before,
        'no store listed',
      );
      assert.deepEqual(got, scan(stores.slice(0, step < 40 ? 1 : 2), ns, sel), `step ${step} ${JSON.stringify(sel)}`);
    }
  });

  it('finds the 3 Runs of one WorkflowRun among 10,000 retained Runs without looking at them', () => {
    const cache = new RelayCache();
    const store = new CountingStore();
    cache.add(R.runs, { store });
    const put = (o: KubeObject): void => {
      if (store.apply({ type: 'ADDED', object: o })) cache.changed(R.runs, o);
    };
    for (let i = 0; i < 10_000; i++) put(run(`done-${i}`, 'Succeeded'));
    for (const step of ['s1', 's2', 's3']) {
      const r = run(step, 'Succeeded');
      put({ ...r, metadata: { ...r.metadata, labels: { 'kruntimes.io/workflowrun-uid': 'u1' } } });
    }
    assert.deepEqual(names(cache.state.list(R.runs, 'ns', { 'kruntimes.io/workflowrun-uid': 'u1' })), [
      's1',
      's2',
      's3',
    ]);
    assert.equal(store.lists, 0);
    assert.deepEqual(names(cache.state.list(R.runs, 'other', { 'kruntimes.io/workflowrun-uid': 'u1' })), []);
    assert.equal(cache.state.list(R.runs, 'ns').length, 10_003, 'an unlabeled list still scans');
  });
});

describe('scheduler and reaper readBy (issue 17)', () => {
  const keys = ['ns/bash', 'ns/python', 'other/bash', 'ns/'];
  const all: KubeObject[] = [];
  for (const phase of PHASES)
    for (const runtime of ['bash', 'python'])
      for (const ns of ['ns', 'other'])
        for (const fin of [false, true]) all.push(run(`${phase}-${runtime}-${ns}-${fin}`, phase, { runtime, ns, fin }));

  for (const fn of [scheduler, reaper] as WatchFunction[])
    it(`${fn.name}: readBy names exactly the keys for which its ignore keeps a Run`, () => {
      const d = fn.trigger.ignore![0]!;
      for (const o of all)
        for (const k of keys)
          assert.equal(d.readBy!(o).includes(k), !d.when(o, k), `${o.metadata.name ?? ''} for ${k}`);
    });

  for (const fn of [scheduler, reaper] as WatchFunction[])
    it(`${fn.name}: an invocation visits only its Runtime's candidates, not 10,000 finished Runs, and decides the same`, async () => {
      const items: [typeof R.runs, KubeObject][] = [[R.pods, pod('p1')]];
      for (let i = 0; i < 10_000; i++) items.push([R.runs, run(`done-${i}`, 'Succeeded', { pod: 'p1' })]);
      items.push(
        [R.runs, run('pending-1', 'Pending')],
        [R.runs, run('pending-2', 'Pending')],
        [R.runs, run('running', 'Running', { pod: 'p1' })],
        [R.runs, run('on-gone-pod', 'Running', { pod: 'p-gone' })],
        [R.runs, run('leftover', 'Succeeded', { pod: 'p-gone', fin: true })],
        [R.runs, run('other-runtime', 'Pending', { runtime: 'python' })],
      );
      const c = counted(fn);
      const { cache } = cacheOf([fn], items);
      const indexed = handlerState(c.fn, cache.state, 'ns/bash');
      const full = handlerState(fn, new FakeState(items), 'ns/bash');
      assert.deepEqual(names(indexed.list(R.runs, 'ns')), names(full.list(R.runs, 'ns')));
      assert.ok(c.calls() <= 5, `ignore evaluated ${c.calls()} times for one list`);
      const input = { key: 'ns/bash', object: undefined, now: NOW };
      const ops = await fn.handler({ ...input, state: indexed });
      assert.ok(ops.length > 0);
      assert.deepEqual(sortOps(ops), sortOps(await fn.handler({ ...input, state: full })));
    });

  it('a Run leaves the scheduler index when it finishes and is read again when reset to Pending', () => {
    const fn = scheduler as WatchFunction;
    const { cache, put } = cacheOf([fn], []);
    const s = handlerState(fn, cache.state, 'ns/bash');
    put(R.runs, run('r', 'Running', { pod: 'p1' }));
    assert.deepEqual(names(s.list(R.runs, 'ns')), ['r']);
    put(R.runs, run('r', 'Succeeded', { pod: 'p1' }), 'MODIFIED');
    assert.deepEqual(names(s.list(R.runs, 'ns')), []);
    put(R.runs, run('r', 'Pending'), 'MODIFIED');
    assert.deepEqual(names(s.list(R.runs, 'ns')), ['r']);
    put(R.runs, run('r', 'Pending'), 'DELETED');
    assert.deepEqual(names(s.list(R.runs, 'ns')), []);
  });
});

describe('workspace-controller readBy (issue 17)', () => {
  const fn = workspaces as WatchFunction;
  const wsRun = (
    name: string,
    phase: string,
    o: { runtime?: string; ws?: string; deleting?: boolean } = {},
  ): KubeObject => {
    const r = run(name, phase, { runtime: o.runtime ?? 'bash' });
    return {
      ...r,
      metadata: { ...r.metadata, ...(o.deleting ? { deletionTimestamp: T } : {}) },
      spec: { ...(r.spec as object), ...(o.ws === undefined ? {} : { workspace: { name: o.ws } }) },
    };
  };

  it('readBy names exactly the keys for which its ignore keeps a Run', () => {
    const d = fn.trigger.ignore![0]!;
    for (const phase of PHASES)
      for (const ws of [undefined, 'w'])
        for (const deleting of [false, true]) {
          const o = wsRun(`${phase}-${ws ?? '-'}-${deleting}`, phase, { ws, deleting });
          for (const k of ['ns/bash', 'ns/python', 'other/bash'])
            assert.equal(d.readBy!(o).includes(k), !d.when(o, k), `${o.metadata.name ?? ''} for ${k}`);
        }
  });

  it('an invocation visits only the active workspace Runs of its Runtime, not 10,000 finished ones, and decides the same', async () => {
    const workspace: KubeObject = {
      metadata: { name: 'w', namespace: 'ns', uid: 'uid-w', resourceVersion: '1' },
      spec: { runtime: 'bash' },
      status: { phase: 'Bound', boundPod: 'p1', boundPodUID: 'uid-p1' },
    };
    const items: [typeof R.runs, KubeObject][] = [
      [R.pods, pod('p1')],
      [R.persistentWorkspaces, workspace],
    ];
    for (let i = 0; i < 10_000; i++) items.push([R.runs, wsRun(`done-${i}`, 'Succeeded', { ws: 'w' })]);
    items.push(
      [R.runs, wsRun('active', 'Running', { ws: 'w' })],
      [R.runs, wsRun('plain', 'Running')],
      [R.runs, wsRun('deleting', 'Running', { ws: 'w', deleting: true })],
    );
    const c = counted(fn);
    const { cache } = cacheOf([fn], items);
    const indexed = handlerState(c.fn, cache.state, 'ns/bash');
    const full = handlerState(fn, new FakeState(items), 'ns/bash');
    assert.deepEqual(names(indexed.list(R.runs, 'ns')), ['active']);
    assert.deepEqual(names(full.list(R.runs, 'ns')), ['active']);
    assert.ok(c.calls() <= 5, `ignore evaluated ${c.calls()} times for one list`);
    const input = { key: 'ns/bash', object: undefined, now: NOW };
    assert.deepEqual(
      sortOps(await fn.handler({ ...input, state: indexed })),
      sortOps(await fn.handler({ ...input, state: full })),
    );
  });
});

describe('run-artifact-gc readBy (issue 17)', () => {
  const fn = artifactGc as WatchFunction;
  const gcRun = (name: string, o: { runtime?: string; fin?: boolean; deleting?: boolean } = {}): KubeObject => {
    const r = run(name, 'Succeeded', { runtime: o.runtime ?? 'bash', pod: 'p1' });
    return {
      ...r,
      metadata: {
        ...r.metadata,
        ...(o.fin ? { finalizers: [GC_FINALIZER] } : {}),
        ...(o.deleting ? { deletionTimestamp: T } : {}),
      },
      status: { ...(r.status as object), artifactStore: { driver: 'filesystem' } },
    };
  };

  it('readBy names exactly the keys for which its ignore keeps a Run', () => {
    const d = fn.trigger.ignore![0]!;
    for (const runtime of ['bash', 'python', ''])
      for (const fin of [false, true])
        for (const deleting of [false, true]) {
          const o = gcRun(`${runtime}-${fin}-${deleting}`, { runtime, fin, deleting });
          for (const k of ['ns/bash', 'ns/python', 'ns/', 'other/bash', 'other/'])
            assert.equal(d.readBy!(o).includes(k), !d.when(o, k), `${o.metadata.name ?? ''} for ${k}`);
        }
  });

  it('an invocation visits only the Runs that hold the cleanup finalizer, not 10,000 retained ones, and decides the same', async () => {
    const items: [typeof R.runs, KubeObject][] = [[R.pods, pod('p1')]];
    for (let i = 0; i < 10_000; i++) items.push([R.runs, gcRun(`done-${i}`)]);
    items.push(
      [R.runs, gcRun('held', { fin: true })],
      [R.runs, gcRun('deleted', { fin: true, deleting: true })],
      [R.runs, gcRun('deleted-other', { fin: true, deleting: true, runtime: 'python' })],
    );
    const c = counted(fn);
    const { cache } = cacheOf([fn], items);
    for (const key of ['ns/bash', 'ns/']) {
      const indexed = handlerState(c.fn, cache.state, key);
      const full = handlerState(fn, new FakeState(items), key);
      assert.deepEqual(names(indexed.list(R.runs, 'ns')), names(full.list(R.runs, 'ns')));
      const input = { key, object: undefined, now: NOW };
      assert.deepEqual(
        sortOps(await fn.handler({ ...input, state: indexed })),
        sortOps(await fn.handler({ ...input, state: full })),
      );
    }
    assert.deepEqual(names(handlerState(fn, cache.state, 'ns/bash').list(R.runs, 'ns')), ['deleted']);
    assert.deepEqual(names(handlerState(fn, cache.state, 'ns/').list(R.runs, 'ns')), [
      'deleted',
      'deleted-other',
      'held',
    ]);
    assert.ok(c.calls() <= 20, `ignore evaluated ${c.calls()} times`);
  });
});
