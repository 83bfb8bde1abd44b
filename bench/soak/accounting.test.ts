import assert from 'node:assert/strict';
import {
  account,
  capacity,
  clean,
  flipped,
  formatResult,
  retained,
  verdict,
  type MemorySample,
  type Outcome,
} from './accounting.ts';

const ok = (name: string, extra: Partial<Outcome> = {}): Outcome => ({
  name,
  kind: 'task-short',
  createdAt: 1000,
  completedAt: 2000,
  phase: 'Succeeded',
  phases: ['Pending', 'Running', 'Succeeded'],
  executions: 1,
  ...extra,
});

describe('soak accounting', () => {
  it('classifies each outcome once, the worst first', () => {
    assert.equal(verdict(ok('a')), 'succeeded');
    assert.equal(verdict(ok('a', { createdAt: undefined, createError: 'x' })), 'rejected');
    assert.equal(verdict(ok('a', { executions: 2 })), 'duplicated');
    assert.equal(verdict(ok('a', { phase: 'Failed', executions: 2 })), 'duplicated');
    assert.equal(verdict(ok('a', { phases: ['Running', 'Failed', 'Succeeded'] })), 'flipped');
    assert.equal(verdict(ok('a', { phase: 'Running', phases: ['Running'] })), 'lost');
    assert.equal(verdict(ok('a', { phase: undefined, phases: [] })), 'lost');
    assert.equal(verdict(ok('a', { phase: 'Failed', reason: 'PodGone' })), 'failed');
    assert.equal(verdict(ok('a', { executions: 0 })), 'wrong-output');
    assert.equal(verdict(ok('a', { outputsOk: false })), 'wrong-output');
    assert.equal(verdict(ok('a', { executions: undefined })), 'succeeded', 'kinds without a marker');
  });

  it('a log gone with its deleted Runtime Pod is its own documented verdict, not a problem', () => {
    const gone = ok('f', { kind: 'log-follow', logsGone: true, outputsProblem: 'gone (409)' });
    assert.equal(verdict(gone), 'logs-gone');
    assert.equal(verdict({ ...gone, executions: 2 }), 'duplicated', 'a duplicate stays a duplicate');
    assert.equal(verdict({ ...gone, outputsOk: false }), 'wrong-output');
    const r = account([ok('a'), gone], [], { stuck: [], orphans: [], memory: [], end: 3000 });
    assert.deepEqual([r.counts.succeeded, r.counts['logs-gone'], r.problems, clean(r)], [1, 1, [], true]);
    assert.match(formatResult(r), /log gone with its deleted Runtime Pod \(documented 409\) \| 1 \|/);
  });

  it('flipped: only a change after the first terminal phase', () => {
    assert.equal(flipped(['Pending', 'Running', 'Succeeded']), false);
    assert.equal(flipped(['Succeeded', 'Succeeded']), false);
    assert.equal(flipped(['Failed', 'Running']), true);
    assert.equal(flipped([]), false);
    // A Job's ResultUnknown is not terminal: observed again, it goes on to its result.
    assert.equal(flipped(['Scheduled', 'Unknown', 'Running', 'Succeeded']), false);
    assert.equal(verdict({ ...ok('j'), phase: 'Unknown', phases: ['Scheduled', 'Unknown'] }), 'lost');
  });

  it('counts, reasons, latency split by fault windows, recovery per kind', () => {
    const outcomes = [
      ok('a', { createdAt: 0, completedAt: 100 }),
      ok('b', { createdAt: 5000, completedAt: 9000 }),
      ok('c', { phase: 'Failed', reason: 'PodGone' }),
      ok('d', { phase: 'Failed' }),
      ok('e', { phase: 'Running', phases: ['Running'] }),
    ];
    const faults = [
      { target: 'etcd' as const, action: 'kill' as const, atMs: 0, startedAt: 6000, recoveredAt: 8000 },
      { target: 'etcd' as const, action: 'kill' as const, atMs: 0, startedAt: 20000 },
    ];
    const r = account(outcomes, faults, { stuck: [], orphans: [], memory: [], end: 30000 });
    assert.equal(r.submitted, 5);
    assert.equal(r.counts.succeeded, 2);
    assert.equal(r.counts.failed, 2);
    assert.equal(r.counts.lost, 1);
    assert.deepEqual(r.failedReasons, { 'Failed/PodGone': 1 });
    assert.equal(r.failedWithoutReason, 1);
    assert.deepEqual([r.latency.faultFree.n, r.latency.faultFree.p50], [1, 100]);
    assert.deepEqual([r.latency.duringFaults.n, r.latency.duringFaults.p50], [1, 4000]);
    assert.deepEqual(r.recovery, [{ kind: 'etcd kill', n: 2, p50Ms: 2000, maxMs: 2000, unrecovered: 1 }]);
    assert.equal(clean(r), false);
    assert.match(formatResult(r), /\| lost \(not terminal at the end\) \| 1 \|/);
    assert.match(formatResult(r), /lost: task-short e/);
  });

  it('states the CPU per item and the rate that would fill every core', () => {
    const cpu = { ms: 60_000, items: 200, wallMs: 120_000, cores: 2 };
    assert.deepEqual(capacity(cpu), { perItemMs: 300, maxRate: 2000 / 300 });
    const r = account([ok('a')], [], { stuck: [], orphans: [], memory: [], end: 1000, cpu });
    assert.match(
      formatResult(r),
      /60\.0 cpu-s over 120\.0 s for 200 items: 300 ms per item, so at most 6\.7 items\/s on 2 cores/,
    );
  });

  it('clean when nothing is lost, duplicated, stuck or orphaned', () => {
    const r = account([ok('a'), ok('b', { phase: 'Failed', reason: 'PodGone' })], [], {
      stuck: [],
      orphans: [],
      memory: [],
      end: 0,
    });
    assert.equal(clean(r), true);
    assert.equal(clean({ ...r, orphans: ['sandbox x Running'] }), false);
    assert.equal(clean({ ...r, stuck: ['namespace'] }), false);
  });

  it('tells retained state (live heap above its baseline) from RSS a runtime has not returned', () => {
    const m = (baseline: number, after: number): MemorySample => ({
      component: 'extension server',
      baselineMb: 165,
      peakMb: 246,
      afterMb: 212,
      live: { baselineMb: baseline, afterMb: after, rssAfterMb: 212 },
    });
    assert.equal(retained(m(20, 24)), false, 'RSS stays up, the live heap is back: not retained');
    assert.equal(retained(m(20, 60)), true);
    assert.equal(retained({ ...m(20, 60), live: undefined }), false, 'no live reading: no verdict');
    const table = formatResult(account([], [], { stuck: [], orphans: [], memory: [m(20, 24), m(20, 60)], end: 0 }));
    assert.match(
      table,
      /extension server live heap baseline \/ after \(RSS then\) \| 20 \/ 24 MB \(212 MB\): back to baseline/,
    );
    assert.match(table, /20 \/ 60 MB \(212 MB\): \*\*retained\*\*/);
    assert.match(table, /retained: extension server live heap 20 -> 60 MB/);
    const clear = account([], [], { stuck: [], orphans: [], memory: [m(20, 24)], end: 0 });
    assert.equal(clean(clear), true);
    assert.equal(
      clean({ ...clear, memory: [m(20, 60)] }),
      false,
      "a kruntimes process's retained state fails the soak",
    );
    const apiserver = { ...m(190, 320), component: 'kube-apiserver' };
    assert.equal(clean({ ...clear, memory: [apiserver] }), true, "the control plane's caches are reported, not failed");
  });
});
