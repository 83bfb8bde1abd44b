import assert from 'node:assert/strict';
import {
  buildStepRun,
  closedObject,
  decideSteps,
  evaluateFlag,
  evaluateMinutes,
  ExpressionError,
  stepRunTimeout,
  stepStatusFunctions,
  type JobScope,
  type JobsSpec,
  type StepStatus,
} from './core.ts';

const NOW = '2026-07-06T12:00:00.000Z';
const jobs: JobsSpec = {
  a: {
    'runs-on': 'bash',
    steps: [
      { name: 'one', run: 'x' },
      { name: 'two', run: 'y', if: "steps.one.outputs.go == 'yes'" },
      { name: 'three', run: 'z' },
    ],
  },
};
const scope: JobScope = { jobs, job: 'a', statuses: {} };
const ctx = { contexts: { matrix: closedObject({ exp: true, n: 2, s: 'x' }, 'matrix key') } };

describe('workflow-core steps', () => {
  it('starts the first pending step, then waits while it runs', () => {
    assert.deepEqual(decideSteps(jobs.a ?? {}, { phase: 'Running' }, scope, NOW).decision, { kind: 'start', index: 0 });
    const running: StepStatus[] = [{ name: 'one', phase: 'Running', runName: 'r1' }];
    assert.deepEqual(decideSteps(jobs.a ?? {}, { phase: 'Running', steps: running }, scope, NOW).decision, {
      kind: 'running',
      index: 0,
    });
  });

  it('skips a step whose if is false and moves on', () => {
    const done: StepStatus[] = [{ name: 'one', phase: 'Succeeded', outputs: { go: 'no' } }];
    const r = decideSteps(jobs.a ?? {}, { phase: 'Running', steps: done }, scope, NOW);
    assert.deepEqual(r.decision, { kind: 'start', index: 2 });
    assert.deepEqual(r.steps[1], {
      name: 'two',
      phase: 'Skipped',
      outcome: 'skipped',
      conclusion: 'skipped',
      message: 'skipped: if condition "steps.one.outputs.go == \'yes\'" evaluated to false',
      finishedAt: NOW,
    });
  });

  it('reports done with the job outcome', () => {
    const all: StepStatus[] = [
      { name: 'one', phase: 'Succeeded' },
      { name: 'two', phase: 'Skipped' },
      { name: 'three', phase: 'Failed', conclusion: 'success', outcome: 'failure' },
    ];
    assert.deepEqual(decideSteps(jobs.a ?? {}, { phase: 'Running', steps: all }, scope, NOW).decision, {
      kind: 'done',
      outcome: 'success',
    });
    const failed: StepStatus[] = [{ name: 'one', phase: 'Failed' }];
    const r = decideSteps(jobs.a ?? {}, { phase: 'Running', steps: failed }, scope, NOW);
    assert.deepEqual(r.decision, { kind: 'done', outcome: 'failure' });
    assert.deepEqual(
      r.steps.map((s) => s.phase),
      ['Failed', 'Skipped', 'Skipped'],
    );
  });

  it('computes step status functions from earlier steps only', () => {
    const s: StepStatus[] = [
      { name: 'a', phase: 'Succeeded' },
      { name: 'b', phase: 'Failed', conclusion: 'success' },
      { name: 'c', phase: 'Failed' },
    ];
    assert.deepEqual(stepStatusFunctions(s, 2, false), { success: true, failure: false, cancelled: false });
    assert.deepEqual(stepStatusFunctions(s, 3, false), { success: false, failure: true, cancelled: false });
  });

  it('evaluates continue-on-error and timeout-minutes fields', () => {
    assert.equal(evaluateFlag(undefined, ctx, 'f'), false);
    assert.equal(evaluateFlag(true, ctx, 'f'), true);
    assert.equal(evaluateFlag('${{ matrix.exp }}', ctx, 'f'), true);
    assert.equal(evaluateFlag('false', ctx, 'f'), false);
    assert.throws(
      () => evaluateFlag('${{ matrix.s }}', ctx, 'jobs.a.continue-on-error'),
      (e: unknown) =>
        e instanceof ExpressionError &&
        e.message.startsWith('jobs.a.continue-on-error: must evaluate to a boolean, got "x"'),
    );
    assert.equal(evaluateMinutes(undefined, ctx, 'f'), undefined);
    assert.equal(evaluateMinutes(1.5, ctx, 'f'), 1.5);
    assert.equal(evaluateMinutes('${{ matrix.n }}', ctx, 'f'), 2);
    assert.throws(() => evaluateMinutes(0, ctx, 'f'), /timeout-minutes must be a positive number, got 0/);
    assert.throws(() => evaluateMinutes('soon', ctx, 'f'), /got "soon"/);
  });

  it('derives the Run timeout from the step and the job deadline', () => {
    assert.equal(stepRunTimeout(undefined, undefined, NOW), undefined);
    assert.equal(stepRunTimeout(1.5, undefined, NOW), '1m30s');
    assert.equal(stepRunTimeout(10, '2026-07-06T12:02:00.000Z', NOW), '2m0s');
    assert.equal(stepRunTimeout(undefined, '2026-07-06T12:00:30.500Z', NOW), '31s');
    assert.equal(stepRunTimeout(1, '2026-07-06T11:00:00.000Z', NOW), '1s');
  });

  it('builds a Run with a job-local workspace and labels', () => {
    const plan = buildStepRun({
      workflowRun: { name: 'wf', uid: 'u' },
      scope,
      jobSpec: jobs.a ?? {},
      unit: { phase: 'Running' },
      stepIndex: 0,
      now: NOW,
      workspace: 'wf-ws',
    });
    assert.equal(plan.kind, 'create');
    assert.deepEqual(plan.kind === 'create' && plan.run.spec, {
      runtime: 'bash',
      source: { inline: 'x' },
      mode: { task: {} },
      workspace: { name: 'wf-ws', kind: 'PersistentWorkspace', apiGroup: 'kruntimes.io/v1alpha1' },
    });
    assert.equal(plan.kind === 'create' && plan.continueOnError, false);
  });

  it('fails a step with the upstream resolve message', () => {
    const bad: JobsSpec = {
      a: { 'runs-on': 'bash', steps: [{ name: 's', run: 'x', args: ["${{ fromJSON('{') }}"] }] },
    };
    const plan = buildStepRun({
      workflowRun: { name: 'wf', uid: 'u' },
      scope: { ...scope, jobs: bad },
      jobSpec: bad.a ?? {},
      unit: { phase: 'Running' },
      stepIndex: 0,
      now: NOW,
    });
    assert.equal(plan.kind, 'fail');
    assert.match(
      plan.kind === 'fail' ? plan.message : '',
      /^resolve step "s" in job "a": jobs\.a\.steps\[0\]\.args\[0\]: fromJSON\(\): invalid JSON "\{"/,
    );
  });
});
