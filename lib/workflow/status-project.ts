/**
 * Projection of observed children into job/combination status: child Runs into steps and
 * Action steps (outputs, outcome, continue-on-error conclusion, timestamps, artifacts), child
 * WorkflowRuns into uses-jobs. A child whose name differs from the recorded runName /
 * workflowRunName is ignored; among duplicates for one step the lowest name wins (upstream).
 * Terminal steps are never re-projected, so projecting twice is a no-op.
 */
import { isTerminal } from '../run/phases.ts';
import { outputContractFromAnnotations, resolveCallOutputs } from './calls.ts';
import type { StepRef } from './names.ts';
import { isStepTerminal } from './steps.ts';
import type { ArtifactRef, ExecutionStatus, JobStatus, Result, StepStatus, WorkflowRunPhase } from './types.ts';

/** What the controller observed of a child Run (identity from its labels). */
export interface ChildRunView {
  name: string;
  ref: StepRef;
  /** Run.status.phase (empty = Pending). */
  phase?: string;
  /** Run.spec.cancelRequested. */
  cancelRequested?: boolean;
  outputs?: Record<string, string>;
  artifactRefs?: ArtifactRef[];
  startTime?: string;
  completionTime?: string;
  message?: string;
}

/** What the controller observed of a child WorkflowRun (a uses-job call). */
export interface ChildWorkflowRunView {
  name: string;
  job: string;
  combination?: string;
  phase?: WorkflowRunPhase;
  cancelRequested?: boolean;
  /** Child status.jobs (its job outputs feed the frozen output contract). */
  jobs?: Record<string, JobStatus>;
  /** Child annotations holding the output contract (kruntimes.io/workflow-output.<name>). */
  annotations?: Record<string, string>;
  message?: string;
}

export const runResult = (phase: string | undefined): Result =>
  phase === 'Succeeded' ? 'success' : phase === 'Cancelled' ? 'cancelled' : 'failure';

function runFailureMessage(run: ChildRunView): string {
  const why = run.phase === 'Timeout' ? 'timed out' : run.phase === 'Cancelled' ? 'was cancelled' : 'failed';
  return `Run "${run.name}" ${why}${run.message ? `: ${run.message}` : ''}`;
}

function projectStep(step: StepStatus, run: ChildRunView, now: string): StepStatus {
  if (isStepTerminal(step) || (step.runName && step.runName !== run.name)) return step;
  const started: StepStatus = {
    ...step,
    runName: run.name,
    phase: 'Running',
    startedAt: step.startedAt ?? run.startTime ?? now,
  };
  if (!isTerminal(run.phase)) return started;
  const outcome = runResult(run.phase);
  const conclusion = outcome === 'failure' && step.continueOnError ? 'success' : outcome;
  return {
    ...started,
    phase: outcome === 'success' ? 'Succeeded' : 'Failed',
    outcome,
    conclusion,
    outputs: { ...(run.outputs ?? {}) },
    finishedAt: run.completionTime ?? now,
    ...(outcome === 'success' ? {} : { message: runFailureMessage(run) }),
  };
}

function projectActionStep(step: StepStatus, run: ChildRunView, now: string): StepStatus {
  const actions = [...(step.actionSteps ?? [])];
  const i = actions.findIndex((a) => a.name === run.ref.actionStep);
  const a = actions[i];
  if (
    !a ||
    isStepTerminal(step) ||
    a.phase === 'Succeeded' ||
    a.phase === 'Failed' ||
    (a.runName && a.runName !== run.name)
  )
    return step;
  const done = isTerminal(run.phase);
  const ok = run.phase === 'Succeeded';
  actions[i] = {
    ...a,
    runName: run.name,
    phase: !done ? 'Running' : ok ? 'Succeeded' : 'Failed',
    ...(done ? { outputs: { ...(run.outputs ?? {}) } } : {}),
  };
  const next: StepStatus = {
    ...step,
    actionSteps: actions,
    phase: 'Running',
    startedAt: step.startedAt ?? run.startTime ?? now,
  };
  if (!done || ok) return next;
  const outcome = runResult(run.phase);
  return {
    ...next,
    phase: 'Failed',
    outcome,
    conclusion: outcome === 'failure' && step.continueOnError ? 'success' : outcome,
    finishedAt: run.completionTime ?? now,
    message: `action step "${a.name}": ${runFailureMessage(run)}`,
  };
}

/**
 * Projects the child Runs of one job/combination into its steps; artifacts of steps that
 * succeed now are merged into the unit's artifact map in step order (later steps replace).
 */
export function projectRuns(unit: ExecutionStatus, runs: readonly ChildRunView[], now: string): ExecutionStatus {
  if (runs.length === 0 || !unit.steps) return unit;
  const steps = [...unit.steps];
  const sorted = [...runs].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const produced: ArtifactRef[][] = steps.map(() => []);
  for (const run of sorted) {
    const i = steps.findIndex((s) => s.name === run.ref.step);
    const before = steps[i];
    if (!before) continue;
    const after =
      run.ref.actionStep !== undefined ? projectActionStep(before, run, now) : projectStep(before, run, now);
    steps[i] = after;
    const succeededNow =
      run.ref.actionStep !== undefined
        ? (after.actionSteps ?? []).some(
            (a, k) =>
              a.phase === 'Succeeded' && a.runName === run.name && before.actionSteps?.[k]?.phase !== 'Succeeded',
          )
        : after.phase === 'Succeeded' && before.phase !== 'Succeeded';
    if (succeededNow) produced[i]?.push(...(run.artifactRefs ?? []));
  }
  const artifacts = { ...(unit.artifacts ?? {}) };
  for (const refs of produced) for (const ref of refs) artifacts[ref.name] = ref;
  const sortedArtifacts = Object.fromEntries(
    Object.keys(artifacts)
      .sort()
      .map((k) => [k, artifacts[k] as ArtifactRef]),
  );
  return { ...unit, steps, ...(Object.keys(artifacts).length ? { artifacts: sortedArtifacts } : {}) };
}

/** The terminal outcome of a uses-job from its child WorkflowRun; undefined while it runs. */
export function callOutcome(
  unit: ExecutionStatus,
  child: ChildWorkflowRunView | undefined,
  job: string,
): { outcome: Result; outputs?: Record<string, string>; message?: string } | undefined {
  if (!child || (unit.workflowRunName && unit.workflowRunName !== child.name)) return undefined;
  if (child.phase === 'Succeeded') {
    try {
      return {
        outcome: 'success',
        outputs: resolveCallOutputs(outputContractFromAnnotations(child.annotations), child.jobs ?? {}),
      };
    } catch (e) {
      return {
        outcome: 'failure',
        message: `resolve outputs of child WorkflowRun "${child.name}" for job "${job}": ${(e as Error).message}`,
      };
    }
  }
  if (child.phase === 'Failed')
    return {
      outcome: 'failure',
      message: `child WorkflowRun "${child.name}" failed${child.message ? `: ${child.message}` : ''}`,
    };
  if (child.phase === 'Cancelled')
    return { outcome: 'cancelled', message: `child WorkflowRun "${child.name}" was cancelled` };
  return undefined;
}
