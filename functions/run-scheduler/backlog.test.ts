/**
 * A backlog (issue 17): one scheduler invocation decides a Runtime's pending Runs against its Pods
 * only until the first of each shape waits; the rest of the backlog is answered from that wait, so
 * an invocation's work grows with the backlog's length by a lookup per Run, not by a full decision.
 */
import assert from 'node:assert/strict';
import { planBatch } from './core.ts';
import { activeRun, capacityAnnotations, NOW, pod, run, term } from './testing.ts';

describe('run-scheduler planBatch on a backlog', () => {
  const full = pod('p1', { annotations: capacityAnnotations({ runs: '4' }) });
  const active = [0, 1, 2, 3].map((i) => activeRun(`a${i}`, 'p1'));

  it('decides one Run of a 1,000-Run backlog against the Pods when none fits; all wait with its reason', () => {
    const pending = Array.from({ length: 1000 }, (_, i) => run(`b${i}`, { t: i }));
    const stats = { evaluated: 0 };
    const plan = planBatch(
      { runtime: 'bash', pending, active, pods: [full], workspaces: new Map(), now: NOW },
      { stats },
    );
    assert.equal(plan.wait.length, 1000);
    assert.ok(plan.wait.every((w) => w.reason === 'InsufficientCapacity' && w.message === plan.wait[0]!.message));
    assert.equal(stats.evaluated, 1);
  });

  it('binds what fits, then one decision per shape; Runs with affinity or other requests are decided each', () => {
    const room = pod('p1', { annotations: capacityAnnotations({ runs: '6' }) });
    const pending = [
      ...Array.from({ length: 100 }, (_, i) => run(`plain${i}`, { t: i })),
      ...Array.from({ length: 10 }, (_, i) => run(`big${i}`, { t: 200 + i, requests: { runs: '2' } })),
      ...Array.from({ length: 3 }, (_, i) =>
        run(`aff${i}`, {
          t: 300 + i,
          affinity: { runAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [term({ app: 'x' })] } },
        }),
      ),
    ];
    const stats = { evaluated: 0 };
    const plan = planBatch(
      { runtime: 'bash', pending, active, pods: [room], workspaces: new Map(), now: NOW },
      { stats },
    );
    assert.deepEqual(
      plan.bind.map((b) => b.run.name),
      ['plain0', 'plain1'],
    );
    assert.equal(plan.wait.length, pending.length - 2);
    // 2 binds + the first plain wait + the first big wait + each affinity Run.
    assert.equal(stats.evaluated, 2 + 1 + 1 + 3);
    const without = { evaluated: 0 };
    planBatch(
      { runtime: 'bash', pending, active, pods: [room], workspaces: new Map(), now: NOW },
      { memo: false, stats: without },
    );
    assert.equal(without.evaluated, pending.length);
  });
});
