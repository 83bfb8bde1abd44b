import assert from 'node:assert/strict';
import { wake, wakeAlso } from './relay.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import type { WatchTrigger } from '../lib/fn/types.ts';
import fn, { expire } from '../functions/run-ttl/index.ts';
import scheduler from '../functions/run-scheduler/index.ts';
import reaper from '../functions/run-reaper/index.ts';
import { runtimePod } from '../lib/run/heartbeat-fixtures.ts';
import { WorkQueue, type Clock } from '../lib/fn/queue.ts';

/** Timers that only fire when told; counts the ones still pending. */
class FakeClock implements Clock {
  private readonly timers = new Set<object>();
  constructor(private t: number) {}
  now(): number {
    return this.t;
  }
  setTimeout(): unknown {
    const id = {};
    this.timers.add(id);
    return id;
  }
  clearTimeout(id: unknown): void {
    this.timers.delete(id as object);
  }
  pending(): number {
    return this.timers.size;
  }
}

const NOW = Date.parse('2026-12-01T20:30:00Z');
const finished = (name: string, completedAgoS: number, over: Partial<KubeObject['metadata']> = {}): KubeObject => ({
  metadata: { name, namespace: 'bench', uid: `u-${name}`, ...over },
  spec: { runtime: 'bash', ttlSecondsAfterFinished: 300 },
  status: { phase: 'Succeeded', completionTime: new Date(NOW - completedAgoS * 1000).toISOString() },
});

/** What the relay queues for a sequence of events of run-ttl's primary kind. */
function queued(events: Parameters<typeof wake>[1][]): { now: string[]; later: [string, number][] } {
  const out = { now: [] as string[], later: [] as [string, number][] };
  const q = {
    add: (k: string) => void out.now.push(k),
    addAfter: (k: string, ms: number) => void out.later.push([k, ms]),
    drop: () => undefined,
  };
  for (const e of events) wake(fn.trigger as WatchTrigger, e, q, NOW);
  return out;
}

describe('run-ttl trigger (issue 13: run-ttl invocation storm)', () => {
  it('a relist of finished Runs that are not due invokes nothing now, each is queued for its TTL', () => {
    const runs = Array.from({ length: 300 }, (_, i) => finished(`r-${i}`, i % 200));
    const q = queued(runs.map((object) => ({ type: 'added' as const, object })));
    assert.deepEqual(q.now, []);
    assert.equal(q.later.length, 300);
    assert.deepEqual(q.later[7], ['bench/r-7', 293_000]);
  });

  it('a Run past its TTL is queued at once, and its handler deletes it', () => {
    const r = finished('old', 301);
    assert.deepEqual(queued([{ type: 'updated', object: r, old: r }]).now, ['bench/old']);
    assert.deepEqual(
      expire({ key: 'bench/old', object: r, state: { get: () => undefined, list: () => [] }, now: new Date(NOW) }).map(
        (o) => o.op,
      ),
      ['delete'],
    );
  });

  it('the deletion of a Run (deletionTimestamp set, then DELETED) queues nothing', () => {
    const r = finished('gone', 301);
    const deleting = finished('gone', 301, { deletionTimestamp: new Date(NOW).toISOString(), finalizers: ['x'] });
    const q = queued([
      { type: 'updated', object: deleting, old: r },
      { type: 'deleted', object: deleting, old: deleting },
    ]);
    assert.deepEqual(q, { now: [], later: [] });
  });

  it('the deletion of a Run waiting for its TTL drops its timer (a namespace deleted with its Runs leaves none)', () => {
    const clock = new FakeClock(NOW);
    const q = new WorkQueue(clock);
    const runs = Array.from({ length: 50 }, (_, i) => finished(`r-${i}`, 10));
    for (const object of runs) wake(fn.trigger as WatchTrigger, { type: 'added', object }, q, NOW);
    assert.equal(q.delayedCount, 50, 'each finished Run waits for its TTL');
    for (const object of runs) wake(fn.trigger as WatchTrigger, { type: 'deleted', object, old: object }, q, NOW);
    assert.equal(q.delayedCount, 0);
    assert.equal(clock.pending(), 0, 'no timer left');
  });

  it('Runs that are not finished, or have no TTL, queue nothing', () => {
    const running = { ...finished('x', 0), status: { phase: 'Running' } } as KubeObject;
    const noTtl = { ...finished('y', 400), spec: { runtime: 'bash' } } as KubeObject;
    assert.deepEqual(
      queued([
        { type: 'added', object: running },
        { type: 'added', object: noTtl },
      ]),
      {
        now: [],
        later: [],
      },
    );
  });
});

describe('run-scheduler and run-reaper Pod triggers (issue 17: every heartbeat woke them)', () => {
  const NOW2 = Date.parse('2026-12-02T09:00:05.100Z');
  for (const f of [scheduler, reaper]) {
    const also = (f.trigger as WatchTrigger).also![0]!;
    const keys = (d: Parameters<typeof wakeAlso>[1]): string[] => {
      const out: string[] = [];
      wakeAlso(also, d, { add: (k) => void out.push(k) }, NOW2, { get: () => undefined, list: () => [] });
      return out;
    };
    it(`${f.name}: a heartbeat-only update queues nothing; a Ready change or a returning heartbeat queues the Runtime`, () => {
      const beat = Date.parse('2026-12-02T09:00:00Z');
      const old = runtimePod(beat, '1');
      assert.deepEqual(keys({ type: 'updated', old, object: runtimePod(beat + 5000, '2') }), []);
      assert.deepEqual(keys({ type: 'updated', old, object: runtimePod(beat + 5000, '2', { ready: 'False' }) }), [
        'ns/rt',
      ]);
      const stale = runtimePod(beat - 60_000, '1');
      assert.deepEqual(keys({ type: 'updated', old: stale, object: runtimePod(beat + 5000, '2') }), ['ns/rt']);
      assert.deepEqual(keys({ type: 'added', object: old }), ['ns/rt']);
    });
  }
});
