/**
 * Sequential steps of one job (or one matrix combination): expression contexts of a step,
 * step-level status functions, and the next-step decision with GitHub `if:` semantics. After a
 * failed step, later steps run only when their `if:` uses failure()/always()/cancelled(); a
 * false `if:` skips the step; an `if:` that cannot be evaluated fails the step. Skips and
 * failures are pure status changes, so they are applied here; only "start" needs the controller.
 * Cancellation is a hard stop (upstream): once requested, no pending step starts, whatever its
 * `if:` says; such steps conclude `cancelled`.
 */
import { formatDuration } from '../run/duration.ts';
import {
  contexts,
  envContext,
  inputsContext,
  jobsContext,
  matrixContext,
  needsContext,
  stepsContext,
} from './context.ts';
import { ancestors } from './dag.ts';
import {
  evaluateCondition,
  evaluateTemplate,
  ExpressionError,
  parseCondition,
  type ExpressionContext,
  type StatusFunctions,
} from './expressions.ts';
import type {
  ActionStepStatus,
  ExecutionStatus,
  JobsSpec,
  JobStatus,
  JsonValue,
  NumberOrExpr,
  BoolOrExpr,
  Result,
  StepSpec,
  StepStatus,
} from './types.ts';

/** Where a job (or combination) runs: what its steps' expressions can see. */
export interface JobScope {
  jobs: JobsSpec;
  job: string;
  statuses: Readonly<Record<string, JobStatus>>;
  /** Matrix values of the combination ({} for a job without matrix). */
  matrix?: Readonly<Record<string, JsonValue>>;
  cancelRequested?: boolean;
}

/** Contexts for step `index`: earlier steps, needs, ancestor jobs, matrix, plus optional env/inputs. */
export function stepContexts(
  scope: JobScope,
  steps: readonly StepStatus[] | undefined,
  index: number,
  extra: { env?: Record<string, string>; inputs?: Record<string, string> } = {},
): ExpressionContext['contexts'] {
  const needs = scope.jobs[scope.job]?.needs ?? [];
  return contexts({
    steps: stepsContext(steps, index),
    needs: needsContext(needs, scope.statuses),
    jobs: jobsContext(ancestors(scope.jobs, scope.job), scope.statuses),
    matrix: matrixContext(scope.matrix ?? {}),
    env: extra.env ? envContext(extra.env) : undefined,
    inputs: extra.inputs ? inputsContext(extra.inputs) : undefined,
  });
}

/** Step-level status functions: over the earlier steps of the same job (after continue-on-error). */
export function stepStatusFunctions(steps: readonly StepStatus[], index: number, cancelled: boolean): StatusFunctions {
  const earlier = steps.slice(0, index).map(stepResult);
  return {
    success: earlier.every((r) => r !== 'failure' && r !== 'cancelled'),
    failure: earlier.some((r) => r === 'failure'),
    cancelled,
  };
}

export function isStepTerminal(s: Pick<StepStatus, 'phase'>): boolean {
  return s.phase === 'Succeeded' || s.phase === 'Failed' || s.phase === 'Skipped';
}

/** Conclusion of a terminal step (upstream statuses without conclusion map by phase). */
export function stepResult(s: StepStatus): Result | null {
  if (s.conclusion) return s.conclusion;
  if (s.phase === 'Succeeded') return 'success';
  if (s.phase === 'Failed') return 'failure';
  if (s.phase === 'Skipped') return 'skipped';
  return null;
}

/** Outcome of a job from its terminal steps: any failure → failure, else any cancelled → cancelled. */
export function stepsOutcome(steps: readonly StepStatus[]): Result {
  const rs = steps.map(stepResult);
  if (rs.some((r) => r === 'failure')) return 'failure';
  if (rs.some((r) => r === 'cancelled')) return 'cancelled';
  return 'success';
}

/** Step statuses aligned with the spec (by name, spec order); unknown entries are dropped. */
export function alignSteps(
  spec: readonly StepSpec[] | undefined,
  steps: readonly StepStatus[] | undefined,
): StepStatus[] {
  const byName = new Map((steps ?? []).map((s) => [s.name, s]));
  return (spec ?? []).map((st) => byName.get(st.name) ?? { name: st.name, phase: 'Pending' });
}

export type StepDecision =
  /** Create the child Run of step `index` (of its Action step `actionStep` for Action-call steps). */
  | { kind: 'start'; index: number; actionStep?: number }
  /** A step is running; nothing to start. */
  | { kind: 'running'; index: number }
  /** An Action-call step whose internal steps all succeeded: resolve its outputs (completeActionStep). */
  | { kind: 'resolve-action'; index: number }
  /** Every step is terminal. */
  | { kind: 'done'; outcome: Result };

function skipped(s: StepStatus, message: string, now: string): StepStatus {
  return { ...s, phase: 'Skipped', outcome: 'skipped', conclusion: 'skipped', message, finishedAt: now };
}

function skipMessage(spec: StepSpec | undefined, status: StatusFunctions, field: string): string {
  const c = parseCondition(spec?.if, field);
  if (!status.success && (spec?.if === undefined || spec.if.trim() === '' || c.implicitSuccess))
    return 'skipped: an earlier step failed';
  return `skipped: if condition ${JSON.stringify(spec?.if ?? 'success()')} evaluated to false`;
}

function activeDecision(s: StepStatus, index: number): StepDecision {
  const actions = s.actionSteps ?? [];
  if (actions.length === 0 || actions.some((a) => a.phase === 'Running' || (a.runName && a.phase === 'Pending')))
    return { kind: 'running', index };
  if (actions.every((a) => a.phase === 'Succeeded')) return { kind: 'resolve-action', index };
  if (actions.some((a) => a.phase === 'Failed')) return { kind: 'running', index };
  const next = actions.findIndex((a: ActionStepStatus) => a.phase === 'Pending' && !a.runName);
  return next < 0 ? { kind: 'running', index } : { kind: 'start', index, actionStep: next };
}

/**
 * Applies skips/failures of pending steps in order and returns the updated steps with the next
 * decision. Under cancellation or `unit.stopped` no step starts: pending steps conclude cancelled. A step whose `if:` cannot be evaluated is
 * Failed with the ExpressionError message.
 */
export function decideSteps(
  jobSpec: { steps?: StepSpec[] },
  unit: ExecutionStatus,
  scope: JobScope,
  now: string,
): { steps: StepStatus[]; decision: StepDecision } {
  const steps = alignSteps(jobSpec.steps, unit.steps);
  const cancel = scope.cancelRequested === true;
  for (let i = 0; i < steps.length; i++) {
    const s = steps[i] as StepStatus;
    if (isStepTerminal(s)) continue;
    const stop = cancel ? 'the WorkflowRun was cancelled' : unit.stopped?.message;
    if (s.phase === 'Running' || s.runName) {
      const d = activeDecision(s, i);
      if (d.kind !== 'start' || stop === undefined) return { steps, decision: d };
      steps[i] = {
        ...s,
        phase: 'Failed',
        outcome: 'cancelled',
        conclusion: 'cancelled',
        message: `not continued: ${stop}`,
        finishedAt: now,
      };
      continue;
    }
    if (stop !== undefined) {
      steps[i] = { ...skipped(s, `not started: ${stop}`, now), outcome: 'cancelled', conclusion: 'cancelled' };
      continue;
    }
    const spec = jobSpec.steps?.[i];
    const field = `jobs.${scope.job}.steps[${i}].if`;
    const status = stepStatusFunctions(steps, i, cancel);
    try {
      if (evaluateCondition(spec?.if, { contexts: stepContexts(scope, steps, i), status }, field)) {
        return {
          steps,
          decision: spec?.uses !== undefined ? { kind: 'start', index: i, actionStep: 0 } : { kind: 'start', index: i },
        };
      }
      steps[i] = skipped(s, skipMessage(spec, status, field), now);
    } catch (e) {
      if (!(e instanceof ExpressionError)) throw e;
      steps[i] = {
        ...s,
        phase: 'Failed',
        outcome: 'failure',
        conclusion: 'failure',
        message: e.message,
        finishedAt: now,
      };
    }
  }
  return { steps, decision: { kind: 'done', outcome: stepsOutcome(steps) } };
}

/** Evaluates a boolean-or-expression field (continue-on-error); non-boolean results are errors. */
export function evaluateFlag(value: BoolOrExpr | undefined, ctx: ExpressionContext, field: string): boolean {
  if (value === undefined) return false;
  const r = typeof value === 'string' ? evaluateTemplate(value, ctx, field) : value;
  if (r === true || r === 'true') return true;
  if (r === false || r === 'false' || r === '' || r === null) return false;
  throw new ExpressionError({
    code: 'type',
    detail: `must evaluate to a boolean, got ${JSON.stringify(r)}`,
    expression: String(value),
    field,
    position: 0,
    offset: 0,
  });
}

/** Evaluates timeout-minutes (positive number, fractions allowed); undefined when unset. */
export function evaluateMinutes(
  value: NumberOrExpr | undefined,
  ctx: ExpressionContext,
  field: string,
): number | undefined {
  if (value === undefined) return undefined;
  const r = typeof value === 'string' ? evaluateTemplate(value, ctx, field) : value;
  const n = typeof r === 'number' ? r : typeof r === 'string' && r.trim() !== '' ? Number(r) : NaN;
  if (!Number.isFinite(n) || n <= 0) {
    throw new ExpressionError({
      code: 'type',
      detail: `timeout-minutes must be a positive number, got ${JSON.stringify(r)}`,
      expression: String(value),
      field,
      position: 0,
      offset: 0,
    });
  }
  return n;
}

/**
 * Run.spec.timeout (Go duration) for a step: the step's timeout-minutes, capped by the time left
 * until the job deadline; undefined when neither is set. A deadline already passed yields "1s"
 * (the job is being timed out anyway).
 */
export function stepRunTimeout(
  stepMinutes: number | undefined,
  jobDeadline: string | undefined,
  now: string,
): string | undefined {
  const stepMs = stepMinutes === undefined ? undefined : Math.round(stepMinutes * 60_000);
  const leftMs =
    jobDeadline === undefined
      ? undefined
      : Math.max(1000, Math.ceil((Date.parse(jobDeadline) - Date.parse(now)) / 1000) * 1000);
  const ms = stepMs === undefined ? leftMs : leftMs === undefined ? stepMs : Math.min(stepMs, leftMs);
  return ms === undefined ? undefined : formatDuration(ms);
}

/** Records the outcome of an Action-call step once its outputs are resolved (or failed to). */
export function completeActionStep(
  step: StepStatus,
  result: { outputs: Record<string, string> } | { error: string },
  now: string,
): StepStatus {
  if ('error' in result) {
    return {
      ...step,
      phase: 'Failed',
      outcome: 'failure',
      conclusion: step.continueOnError ? 'success' : 'failure',
      message: result.error,
      finishedAt: now,
    };
  }
  return {
    ...step,
    phase: 'Succeeded',
    outcome: 'success',
    conclusion: 'success',
    outputs: result.outputs,
    finishedAt: now,
  };
}
