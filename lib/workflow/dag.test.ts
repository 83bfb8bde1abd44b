import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  ancestors,
  computeReadiness,
  DagError,
  decideJob,
  dependents,
  jobGraphProblem,
  jobResult,
  topologicalOrder,
  validateJobGraph,
  type JobsSpec,
  type JobStatus,
} from './core.ts';

const g = (spec: Record<string, string[]>): JobsSpec =>
  Object.fromEntries(
    Object.entries(spec).map(([k, needs]) => [k, { needs, 'runs-on': 'bash', steps: [{ name: 's', run: 'true' }] }]),
  );
const done = (
  conclusion: JobStatus['conclusion'],
  phase: JobStatus['phase'] = conclusion === 'success' ? 'Succeeded' : conclusion === 'skipped' ? 'Skipped' : 'Failed',
): JobStatus => ({ phase, ...(conclusion ? { conclusion } : {}) });

describe('workflow-core dag: validation', () => {
  it('accepts a DAG', () => {
    assert.equal(jobGraphProblem(g({ a: [], b: ['a'], c: ['a', 'b'] })), undefined);
  });

  it('reports an unknown job (upstream message)', () => {
    const e = jobGraphProblem(g({ deploy: ['build'] }));
    assert.ok(e instanceof DagError);
    assert.equal(e.code, 'unknown-job');
    assert.equal(e.message, 'job "deploy" needs unknown job "build"');
  });

  it('reports a self-dependency', () => {
    const e = jobGraphProblem(g({ a: ['a'] }));
    assert.equal(e?.code, 'self-dependency');
    assert.equal(e?.message, 'job "a" needs itself');
  });

  it('reports a cycle with its path, deterministically from the sorted DFS', () => {
    assert.equal(
      jobGraphProblem(g({ a: ['b'], b: ['c'], c: ['a'] }))?.message,
      'workflow job dependency cycle: a -> b -> c -> a',
    );
    assert.deepEqual(jobGraphProblem(g({ x: [], b: ['c'], c: ['b'], a: ['x'] }))?.path, ['b', 'c', 'b']);
    assert.throws(() => validateJobGraph(g({ p: ['q'], q: ['p'] })), /workflow job dependency cycle: p -> q -> p/);
  });

  it('orders jobs topologically, smallest name first among ready jobs', () => {
    assert.deepEqual(topologicalOrder(g({ z: [], a: ['z'], m: [], b: ['m', 'a'] })), ['m', 'z', 'a', 'b']);
    assert.deepEqual(ancestors(g({ a: [], b: ['a'], c: ['b'], d: ['c', 'a'] }), 'd'), ['a', 'b', 'c']);
    assert.deepEqual(dependents(g({ a: [], b: ['a'], c: ['b'], d: [] }), 'a'), ['b', 'c']);
  });

  it('topological order respects every edge on random DAGs', () => {
    const dag = fc
      .integer({ min: 1, max: 12 })
      .chain((n) => fc.array(fc.array(fc.nat({ max: n - 1 }), { maxLength: 3 }), { minLength: n, maxLength: n }))
      .map((lists) =>
        Object.fromEntries(
          lists.map((deps, i) => [`j${i}`, [...new Set(deps.filter((d) => d < i).map((d) => `j${d}`))]]),
        ),
      );
    fc.assert(
      fc.property(dag, (spec) => {
        const order = topologicalOrder(g(spec));
        assert.equal(order.length, Object.keys(spec).length);
        for (const [job, needs] of Object.entries(spec))
          for (const n of needs) assert.ok(order.indexOf(n) < order.indexOf(job), `${n} before ${job}`);
        assert.deepEqual(
          topologicalOrder(g(Object.fromEntries(Object.entries(spec).reverse()))),
          order,
          'independent of key order',
        );
      }),
    );
  });
});

describe('workflow-core dag: readiness', () => {
  it('maps phases to needs.<job>.result', () => {
    assert.equal(jobResult({ phase: 'Succeeded' }), 'success');
    assert.equal(jobResult({ phase: 'Failed' }), 'failure');
    assert.equal(jobResult({ phase: 'Skipped' }), 'skipped');
    assert.equal(jobResult({ phase: 'Failed', conclusion: 'cancelled' }), 'cancelled');
    assert.equal(jobResult({ phase: 'Failed', conclusion: 'success' }), 'success', 'continue-on-error');
    assert.equal(jobResult({ phase: 'Running' }), null);
    assert.equal(jobResult(undefined), null);
  });

  it('starts jobs whose needs succeeded and waits for unfinished needs', () => {
    const r = computeReadiness({
      jobs: g({ a: [], b: ['a'], c: ['b'] }),
      statuses: { a: done('success'), b: { phase: 'Waiting' } },
    });
    assert.deepEqual(r.ready, ['b']);
    assert.deepEqual(r.waiting, ['c']);
  });

  it('skips dependents of a failed job transitively, naming the failed ancestors', () => {
    const r = computeReadiness({ jobs: g({ a: [], b: ['a'], c: ['b'], d: [] }), statuses: { a: done('failure') } });
    assert.deepEqual(r.ready, ['d']);
    assert.deepEqual(
      r.skipped.map((s) => [s.job, s.reason]),
      [
        ['b', 'NeedsNotSuccessful'],
        ['c', 'NeedsNotSuccessful'],
      ],
    );
    assert.equal(r.skipped[0]?.message, 'skipped: job(s) it depends on did not succeed: "a" (failure)');
    assert.equal(r.skipped[1]?.message, 'skipped: job(s) it depends on did not succeed: "a" (failure), "b" (skipped)');
  });

  it('runs failure()/always() jobs after a failure, and skips failure() jobs after success', () => {
    const jobs = g({ a: [], cleanup: ['a'], notify: ['a'], report: ['a'] });
    Object.assign(jobs.cleanup ?? {}, { if: 'always()' });
    Object.assign(jobs.notify ?? {}, { if: '${{ failure() }}' });
    Object.assign(jobs.report ?? {}, { if: "needs.a.result == 'failure'" });
    const failed = computeReadiness({ jobs, statuses: { a: done('failure') } });
    assert.deepEqual(failed.ready, ['cleanup', 'notify']);
    assert.deepEqual(
      failed.skipped.map((s) => s.job),
      ['report'],
      'implicit success() && ...',
    );
    const ok = computeReadiness({ jobs, statuses: { a: done('success') } });
    assert.deepEqual(ok.ready, ['cleanup']);
    assert.deepEqual(
      ok.skipped.map((s) => [s.job, s.reason, s.message]),
      [
        ['notify', 'ConditionFalse', 'skipped: if condition "${{ failure() }}" evaluated to false'],
        ['report', 'ConditionFalse', 'skipped: if condition "needs.a.result == \'failure\'" evaluated to false'],
      ],
    );
  });

  it('uses success() over all ancestors, not only direct needs', () => {
    const jobs = g({ a: [], b: ['a'], c: ['b'] });
    Object.assign(jobs.b ?? {}, { if: 'always()' });
    const r = computeReadiness({ jobs, statuses: { a: done('failure'), b: done('success') } });
    assert.deepEqual(
      r.skipped.map((s) => s.job),
      ['c'],
    );
    Object.assign(jobs.c ?? {}, { if: "!cancelled() && needs.b.result == 'success'" });
    assert.deepEqual(computeReadiness({ jobs, statuses: { a: done('failure'), b: done('success') } }).ready, ['c']);
  });

  it('treats a continue-on-error failure as success for dependents', () => {
    const r = computeReadiness({
      jobs: g({ a: [], b: ['a'] }),
      statuses: { a: { phase: 'Failed', outcome: 'failure', conclusion: 'success' } },
    });
    assert.deepEqual(r.ready, ['b']);
  });

  it('reads needs outputs in conditions', () => {
    const jobs = g({ a: [], b: ['a'] });
    Object.assign(jobs.b ?? {}, { if: "needs.a.outputs.deploy == 'yes'" });
    assert.deepEqual(
      computeReadiness({ jobs, statuses: { a: { phase: 'Succeeded', outputs: { deploy: 'YES' } } } }).ready,
      ['b'],
    );
    assert.deepEqual(
      computeReadiness({ jobs, statuses: { a: { phase: 'Succeeded', outputs: { deploy: 'no' } } } }).skipped.map(
        (s) => s.job,
      ),
      ['b'],
    );
  });

  it('fails a job whose if: cannot be evaluated', () => {
    const jobs = g({ a: [], b: ['a'], c: ['b'] });
    Object.assign(jobs.b ?? {}, { if: 'needs.a.outputs.missing' });
    const r = computeReadiness({ jobs, statuses: { a: done('success') } });
    assert.equal(r.failed[0]?.job, 'b');
    assert.match(r.failed[0]?.message ?? '', /^jobs\.b\.if: needs\.a\.outputs has no output "missing"/);
    assert.deepEqual(
      r.skipped.map((s) => s.job),
      ['c'],
    );
  });

  it('never starts jobs once the WorkflowRun is cancelled (even always())', () => {
    const jobs = g({ a: [], b: ['a'], c: ['b'], d: [] });
    Object.assign(jobs.b ?? {}, { if: 'always()' });
    const r = computeReadiness({ jobs, statuses: { a: done('failure') }, cancelRequested: true });
    assert.deepEqual(r.ready, []);
    assert.deepEqual(r.cancelled, ['b', 'c', 'd']);
    assert.deepEqual(decideJob(jobs, 'a', {}, true), { kind: 'cancel' });
  });

  it('reads outputs of a need that did not succeed as null instead of failing', () => {
    const jobs = g({ a: [], b: ['a'] });
    Object.assign(jobs.b ?? {}, { if: "failure() && needs.a.outputs.x == ''" });
    assert.deepEqual(computeReadiness({ jobs, statuses: { a: done('failure') } }).ready, ['b']);
  });
});
