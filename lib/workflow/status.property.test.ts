/**
 * Property test of the status reducer: random job graphs with random `if:`, continue-on-error
 * and matrices, random Run outcomes; the simulated controller always terminates with a phase
 * consistent with the job results, never creates a child twice, and never starts work GitHub
 * semantics would skip.
 */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ancestors, executionResult, reconcileStatus, type JobsSpec, type JobSpec, type StepSpec } from './core.ts';
import { iso, runToEnd, world, type RunScript } from './testing.ts';

const stepArb = (i: number): fc.Arbitrary<StepSpec> =>
  fc
    .record({
      if: fc.constantFrom(undefined, undefined, 'always()', 'failure()', 'success()'),
      coe: fc.boolean(),
    })
    .map(({ if: cond, coe }) => ({
      name: `s${i}`,
      run: `run ${i}`,
      ...(cond ? { if: cond } : {}),
      ...(coe ? { 'continue-on-error': true } : {}),
    }));

const jobArb = (index: number): fc.Arbitrary<JobSpec> =>
  fc
    .record({
      needs: fc.uniqueArray(fc.nat({ max: Math.max(0, index - 1) }), { maxLength: index === 0 ? 0 : 2 }),
      steps: fc.integer({ min: 1, max: 3 }).chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => stepArb(i)))),
      if: fc.constantFrom(undefined, undefined, undefined, 'always()', 'failure()'),
      matrix: fc.constantFrom(false, false, true),
      failFast: fc.boolean(),
    })
    .map((j) => ({
      'runs-on': 'bash',
      steps: j.steps,
      ...(j.needs.length ? { needs: j.needs.map((n) => `j${n}`) } : {}),
      ...(j.if ? { if: j.if } : {}),
      ...(j.matrix ? { strategy: { matrix: { n: [1, 2] }, 'fail-fast': j.failFast } } : {}),
    }));

const jobsArb: fc.Arbitrary<JobsSpec> = fc
  .integer({ min: 1, max: 6 })
  .chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => jobArb(i))))
  .map((list) => Object.fromEntries(list.map((j, i) => [`j${i}`, j])));

describe('workflow-core status reducer (properties)', () => {
  it('terminates consistently, creates each child once and respects if/needs semantics', () => {
    fc.assert(
      fc.property(
        jobsArb,
        fc.func(fc.constantFrom('Succeeded', 'Succeeded', 'Failed')),
        fc.boolean(),
        (jobs, outcome, cancelMidway) => {
          const w = world(jobs);
          const script: RunScript = (ref) => ({ phase: outcome(ref.job, ref.combination ?? '', ref.step) });
          if (cancelMidway) {
            runToEnd(w, script, 2);
            w.cancelRequested = true;
          }
          const end = runToEnd(w, script, 300);
          assert.ok(['Succeeded', 'Failed', 'Cancelled'].includes(end.phase), `not terminal: ${end.phase}`);
          const created = w.results.flatMap((r) => r.createRuns.map((c) => c.run.name));
          assert.equal(new Set(created).size, created.length, 'a child Run was created twice');
          const results = Object.fromEntries(Object.entries(end.jobs ?? {}).map(([j, s]) => [j, executionResult(s)]));
          for (const [j, r] of Object.entries(results)) assert.notEqual(r, null, `job ${j} has no result`);
          if (end.phase !== 'Cancelled') {
            const bad = Object.values(results).some((r) => r === 'failure' || r === 'cancelled');
            assert.equal(end.phase, bad ? 'Failed' : 'Succeeded');
          }
          for (const run of w.runs.values()) {
            const spec = jobs[run.ref.job];
            if (spec?.if === undefined)
              for (const a of ancestors(jobs, run.ref.job))
                assert.equal(results[a], 'success', `${run.ref.job} ran although ${a} did not succeed`);
          }
          for (const [j, s] of Object.entries(end.jobs ?? {})) {
            for (const unit of s.combinations ?? [s]) {
              (unit.steps ?? []).forEach((st, i) => {
                const cond = jobs[j]?.steps?.[i]?.if;
                if (!st.runName || (cond !== undefined && cond !== 'success()')) return;
                for (const before of (unit.steps ?? []).slice(0, i))
                  assert.notEqual(before.conclusion, 'failure', `${j}/${st.name} ran after a failed step`);
              });
            }
          }
          const again = reconcileStatus({
            workflowRun: { name: 'wf', uid: 'uid-wf', generation: 1 },
            jobs,
            status: end,
            runs: [...w.runs.values()],
            now: iso(w.now + 1000),
          });
          assert.equal(again.status, end);
          assert.deepEqual(again.createRuns, []);
        },
      ),
      { numRuns: 150 },
    );
  });
});
