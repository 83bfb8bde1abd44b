import assert from 'node:assert/strict';
import { faultPlan, FAULT_TARGETS, loadPlan, prng } from './schedule.ts';

describe('soak schedule', () => {
  it('prng is deterministic per seed and in [0, 1)', () => {
    const a = prng(7);
    const b = prng(7);
    const xs = Array.from({ length: 100 }, () => a());
    assert.deepEqual(
      xs,
      Array.from({ length: 100 }, () => b()),
    );
    assert.ok(xs.every((x) => x >= 0 && x < 1));
    assert.notDeepEqual(xs.slice(0, 5), Array.from({ length: 5 }, prng(8)));
  });

  it('load plan: steady spacing, bounded by duration and by maxItems, weights respected', () => {
    const p = loadPlan({
      seed: 1,
      durationMs: 10_000,
      rate: 2,
      maxItems: 1000,
      weights: { 'task-short': 1, workflow: 1 },
    });
    assert.equal(p.length, 20);
    assert.deepEqual(
      p.map((i) => i.atMs),
      Array.from({ length: 20 }, (_, i) => i * 500),
    );
    assert.ok(p.every((i) => i.kind === 'task-short' || i.kind === 'workflow'));
    assert.equal(new Set(p.map((i) => i.name)).size, 20, 'names unique');
    assert.equal(
      loadPlan({ seed: 1, durationMs: 10_000, rate: 2, maxItems: 5, weights: { 'task-short': 1 } }).length,
      5,
    );
    assert.deepEqual(
      p,
      loadPlan({ seed: 1, durationMs: 10_000, rate: 2, maxItems: 1000, weights: { 'task-short': 1, workflow: 1 } }),
    );
  });

  it('load plan rejects a non-positive rate and an empty mix', () => {
    assert.throws(
      () => loadPlan({ seed: 1, durationMs: 1000, rate: 0, maxItems: 10, weights: { 'task-short': 1 } }),
      /rate/,
    );
    assert.throws(() => loadPlan({ seed: 1, durationMs: 1000, rate: 1, maxItems: 10, weights: {} }), /no load kind/);
  });

  const opts = {
    seed: 3,
    durationMs: 600_000,
    meanGapMs: 10_000,
    quietHeadMs: 60_000,
    quietTailMs: 30_000,
    targets: FAULT_TARGETS,
    pauseShare: 0.3,
    pauseMs: [2000, 8000] as [number, number],
  };

  it('fault plan: inside the window, ordered, every target used, pauses bounded, Pods only deleted', () => {
    const f = faultPlan(opts);
    assert.ok(f.length > FAULT_TARGETS.length);
    assert.ok(f.every((x) => x.atMs > 60_000 && x.atMs <= 570_000));
    assert.ok(f.every((x, i) => i === 0 || x.atMs - f[i - 1]!.atMs >= 1000));
    for (const t of FAULT_TARGETS)
      assert.ok(
        f.some((x) => x.target === t),
        `${t} scheduled`,
      );
    assert.ok(f.some((x) => x.action === 'pause'));
    assert.ok(f.filter((x) => x.action === 'pause').every((x) => x.pauseMs >= 2000 && x.pauseMs <= 8000));
    assert.ok(f.filter((x) => x.target === 'runtime-pod').every((x) => x.action === 'kill'));
    assert.deepEqual(f, faultPlan(opts), 'same seed, same plan');
    assert.notDeepEqual(f, faultPlan({ ...opts, seed: 4 }));
  });

  it('fault plan: no targets, no faults; a window too short, no faults', () => {
    assert.deepEqual(faultPlan({ ...opts, targets: [] }), []);
    assert.deepEqual(faultPlan({ ...opts, durationMs: 80_000 }), []);
  });
});
