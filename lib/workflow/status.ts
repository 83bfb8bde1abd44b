/**
 * Pure status reducer of a WorkflowRun ("calculate" of load → calculate → apply → patch).
 *
 * reconcileStatus takes the spec, the previous status, the observed child Runs and child
 * WorkflowRuns, the cancel request and an injected `now`, and returns the next status plus the
 * children to create and to cancel. Jobs are visited in topological order, so one pass reaches
 * a fixed point: a job that finishes now immediately unblocks (or skips) its dependents.
 *
 * Per job: undecided jobs get their readiness (dag.decideJob: start, skip, fail on a bad `if:`,
 * or "cancelled" when the WorkflowRun is cancelled); started jobs evaluate continue-on-error,
 * timeout-minutes and strategy (matrix combinations, fail-fast, max-parallel); running units
 * (a job, or one matrix combination) project their children, time out at their deadline, skip
 * or fail steps per `if:`, start the next step (one per unit per reconcile) and conclude with
 * outcome (before continue-on-error) and conclusion (after). Job outputs are evaluated when the
 * job succeeds; matrix jobs keep every combination's outputs (see matrix.combinedOutputs).
 *
 * Apply contract: create every returned child (AlreadyExists = success, names are
 * deterministic) and patch every returned cancellation; patch the status only if all of that
 * succeeded. The returned status already records the new runNames / workflowRunNames.
 */
import { setCondition } from '../run/conditions.ts';
import { isTerminal } from '../run/phases.ts';
import { buildCallWorkflowRun, callChain, type ChildWorkflowRunManifest, type WorkflowLookup } from './calls.ts';
import { contexts, executionResult, jobsContext, matrixContext, needsContext, stepsContext } from './context.ts';
import { ancestors, decideJob, isUndecided, topologicalOrder } from './dag.ts';
import { ExpressionError, interpolate, type ExpressionContext } from './expressions.ts';
import { combinedOutputs, combinedResult, MatrixError, resolveStrategy, scheduleCombinations } from './matrix.ts';
import type { StepRef } from './names.ts';
import { buildStepRun, resolveActionOutputs, type ActionSnapshot, type ChildRunManifest } from './runs.ts';
import { callOutcome, projectRuns, type ChildRunView, type ChildWorkflowRunView } from './status-project.ts';
import { alignSteps, completeActionStep, decideSteps, evaluateFlag, evaluateMinutes, type JobScope } from './steps.ts';
import type {
  ArtifactRef,
  CombinationStatus,
  Condition,
  ExecutionStatus,
  JobSpec,
  JobsSpec,
  JobStatus,
  Result,
  StepStatus,
  WorkflowRunPhase,
  WorkflowRunStatus,
} from './types.ts';

export type { ChildRunView, ChildWorkflowRunView } from './status-project.ts';

export const CONDITION_ACCEPTED = 'Accepted';
export const CONDITION_COMPLETED = 'Completed';
export const REASON_VALIDATION_FAILED = 'WorkflowValidationFailed';

const TERMINAL_WFR = new Set<WorkflowRunPhase>(['Succeeded', 'Failed', 'Cancelled']);
export const isTerminalWorkflowRunPhase = (p: WorkflowRunPhase | undefined): boolean =>
  p !== undefined && TERMINAL_WFR.has(p);

function condition(
  list: Condition[] | undefined,
  c: Omit<Condition, 'lastTransitionTime' | 'observedGeneration'>,
  now: string,
  generation?: number,
): Condition[] {
  return setCondition(list, { ...c, ...(generation !== undefined ? { observedGeneration: generation } : {}) }, now);
}

// ---------------------------------------------------------------------------------------
// Initialization

export interface InitOptions {
  now: string;
  generation?: number;
  snapshotName?: string;
  /** Names of the internal steps of the Action used by step `step` of job `job`. */
  actionSteps?: (job: string, step: string) => readonly string[] | undefined;
}

/** Status after a successful Initialize: jobs Pending/Waiting, steps Pending, Accepted=True. */
export function initialStatus(jobs: JobsSpec, opts: InitOptions): WorkflowRunStatus {
  const out: Record<string, JobStatus> = {};
  for (const job of Object.keys(jobs).sort()) {
    const spec = jobs[job] as JobSpec;
    const pre = [...new Set(spec.needs ?? [])].sort();
    const steps: StepStatus[] = (spec.steps ?? []).map((s) => {
      const actions = s.uses !== undefined ? opts.actionSteps?.(job, s.name) : undefined;
      return {
        name: s.name,
        phase: 'Pending',
        ...(actions ? { actionSteps: actions.map((name) => ({ name, phase: 'Pending' as const })) } : {}),
      };
    });
    out[job] = {
      phase: pre.length ? 'Waiting' : 'Pending',
      ...(pre.length ? { pre } : {}),
      ...(steps.length ? { steps } : {}),
    };
  }
  return {
    phase: 'Pending',
    jobs: out,
    ...(opts.snapshotName ? { snapshotName: opts.snapshotName } : {}),
    conditions: condition(
      undefined,
      { type: CONDITION_ACCEPTED, status: 'True', reason: 'Accepted', message: 'WorkflowRun accepted' },
      opts.now,
      opts.generation,
    ),
  };
}

/** Status of a WorkflowRun rejected at Initialize: Failed, message, Accepted=False/WorkflowValidationFailed. */
export function rejectedStatus(
  prev: WorkflowRunStatus | undefined,
  message: string,
  opts: { now: string; generation?: number },
): WorkflowRunStatus {
  let conditions = condition(
    prev?.conditions,
    { type: CONDITION_ACCEPTED, status: 'False', reason: REASON_VALIDATION_FAILED, message },
    opts.now,
    opts.generation,
  );
  conditions = condition(
    conditions,
    { type: CONDITION_COMPLETED, status: 'True', reason: 'Failed', message },
    opts.now,
    opts.generation,
  );
  return { ...(prev ?? {}), phase: 'Failed', message, conditions };
}

// ---------------------------------------------------------------------------------------
// Reconcile

export interface ReconcileInput {
  workflowRun: { name: string; uid: string; generation?: number; annotations?: Record<string, string> };
  jobs: JobsSpec;
  status: WorkflowRunStatus;
  runs?: readonly ChildRunView[];
  workflowRuns?: readonly ChildWorkflowRunView[];
  cancelRequested?: boolean;
  now: string;
  /** Actions frozen in the snapshot, by job and step name. */
  action?: (job: string, step: string) => ActionSnapshot | undefined;
  /** Reusable Workflows of the namespace (preloaded, see calls.reachableWorkflows). */
  workflows?: WorkflowLookup;
  /** Job-local PersistentWorkspace name for a job/combination (omit for none). */
  workspace?: (job: string, combination?: string) => string | undefined;
}

export interface StepStart {
  ref: StepRef;
  stepIndex: number;
  actionStepIndex?: number;
  run: ChildRunManifest;
}
export interface CallStart {
  job: string;
  combination?: string;
  workflowRun: ChildWorkflowRunManifest;
}
export type CancelReason = 'WorkflowRunCancelled' | 'JobTimedOut' | 'FailFast';
export interface ChildCancel {
  kind: 'Run' | 'WorkflowRun';
  name: string;
  reason: CancelReason;
}

export interface ReconcileResult {
  status: WorkflowRunStatus;
  createRuns: StepStart[];
  createWorkflowRuns: CallStart[];
  /** Children whose spec.cancelRequested must be set. */
  cancel: ChildCancel[];
  /** Reconcile again after this many milliseconds (earliest pending job deadline). */
  requeueAfterMs?: number;
}

interface Acc {
  input: ReconcileInput;
  cancel: boolean;
  statuses: Record<string, JobStatus>;
  result: ReconcileResult;
}

function isUnitTerminal(u: ExecutionStatus): boolean {
  return executionResult(u) !== null;
}

/** Terminal transition of a job or combination (a never-started unit that is cancelled keeps its phase, as upstream). */
export function concludeUnit<T extends ExecutionStatus>(unit: T, outcome: Result, now: string, message?: string): T {
  const timedOut = unit.stopped?.reason === 'TimedOut';
  const out: Result = timedOut && outcome !== 'success' ? 'failure' : outcome;
  const msg =
    message ??
    (out !== 'success' ? (unit.stopped?.message ?? unit.message ?? failedStepMessage(unit.steps)) : undefined);
  const neverStarted = out === 'cancelled' && (unit.phase === 'Pending' || unit.phase === 'Waiting');
  return {
    ...unit,
    phase: neverStarted ? unit.phase : out === 'success' ? 'Succeeded' : out === 'skipped' ? 'Skipped' : 'Failed',
    outcome: out,
    conclusion: out === 'failure' && unit.continueOnError ? 'success' : out,
    finishedAt: unit.finishedAt ?? now,
    ...(msg ? { message: msg } : {}),
  };
}

function failedStepMessage(steps: readonly StepStatus[] | undefined): string | undefined {
  const s = (steps ?? []).find(
    (x) => x.conclusion === 'failure' || (x.conclusion === undefined && x.phase === 'Failed'),
  );
  return s ? `step "${s.name}" failed${s.message ? `: ${s.message}` : ''}` : undefined;
}

function scopeOf(acc: Acc, job: string, matrix?: CombinationStatus['matrix']): JobScope {
  return { jobs: acc.input.jobs, job, statuses: acc.statuses, matrix: matrix ?? {}, cancelRequested: acc.cancel };
}

function jobContext(acc: Acc, job: string, matrix?: CombinationStatus['matrix']): ExpressionContext {
  const needs = acc.input.jobs[job]?.needs ?? [];
  return {
    contexts: contexts({
      needs: needsContext(needs, acc.statuses),
      jobs: jobsContext(ancestors(acc.input.jobs, job), acc.statuses),
      matrix: matrixContext(matrix ?? {}),
    }),
  };
}

/** Running transition of a job or combination: continue-on-error and deadline are evaluated now. */
function startUnit<T extends ExecutionStatus>(acc: Acc, job: string, unit: T, ctx: ExpressionContext): T {
  const spec = acc.input.jobs[job] as JobSpec;
  const now = acc.input.now;
  const started: T = { ...unit, phase: 'Running', startedAt: unit.startedAt ?? now };
  try {
    const continueOnError = evaluateFlag(spec['continue-on-error'], ctx, `jobs.${job}.continue-on-error`);
    const minutes = evaluateMinutes(spec['timeout-minutes'], ctx, `jobs.${job}.timeout-minutes`);
    const deadline =
      minutes === undefined ? undefined : new Date(Date.parse(now) + Math.round(minutes * 60_000)).toISOString();
    return { ...started, ...(continueOnError ? { continueOnError } : {}), ...(deadline ? { deadline } : {}) };
  } catch (e) {
    if (e instanceof ExpressionError) return concludeUnit(started, 'failure', now, e.message);
    throw e;
  }
}

function startJob(acc: Acc, job: string, status: JobStatus): JobStatus {
  const spec = acc.input.jobs[job] as JobSpec;
  const now = acc.input.now;
  const template = alignSteps(spec.steps, status.steps);
  try {
    const strategy = resolveStrategy(job, spec.strategy, jobContext(acc, job));
    if (!strategy)
      return startUnit(acc, job, { ...status, ...(template.length ? { steps: template } : {}) }, jobContext(acc, job));
    const combinations: CombinationStatus[] = strategy.combinations.map((c) => ({
      id: c.id,
      name: c.name,
      index: c.index,
      matrix: c.values,
      phase: 'Pending',
      ...(template.length ? { steps: template.map((s) => ({ ...s })) } : {}),
    }));
    const { steps: _steps, ...rest } = status;
    return {
      ...rest,
      phase: 'Running',
      startedAt: now,
      combinations,
      strategy: {
        failFast: strategy.failFast,
        ...(strategy.maxParallel !== undefined ? { maxParallel: strategy.maxParallel } : {}),
      },
    };
  } catch (e) {
    if (e instanceof ExpressionError || e instanceof MatrixError)
      return concludeUnit({ ...status, phase: 'Running', startedAt: now }, 'failure', now, e.message);
    throw e;
  }
}

function applyVerdict(acc: Acc, job: string, status: JobStatus): JobStatus {
  const now = acc.input.now;
  const v = decideJob(acc.input.jobs, job, acc.statuses, acc.cancel);
  switch (v.kind) {
    case 'wait':
      return status;
    case 'ready':
      return startJob(acc, job, status);
    case 'cancel':
      return {
        ...status,
        outcome: 'cancelled',
        conclusion: 'cancelled',
        finishedAt: now,
        message: 'not started: the WorkflowRun was cancelled',
      };
    case 'fail':
      return {
        ...status,
        phase: 'Failed',
        outcome: 'failure',
        conclusion: 'failure',
        finishedAt: now,
        message: v.error.message,
      };
    case 'skip':
      return {
        ...status,
        phase: 'Skipped',
        outcome: 'skipped',
        conclusion: 'skipped',
        finishedAt: now,
        message: v.message,
      };
  }
}

// ---------------------------------------------------------------------------------------
// Units (a job or one matrix combination)

function checkDeadline<T extends ExecutionStatus>(unit: T, now: string): T {
  if (!unit.deadline || unit.stopped || isUnitTerminal(unit) || Date.parse(now) < Date.parse(unit.deadline))
    return unit;
  return {
    ...unit,
    stopped: { reason: 'TimedOut', message: `the job exceeded its timeout-minutes (deadline ${unit.deadline})` },
  };
}

function advanceCall<T extends ExecutionStatus>(
  acc: Acc,
  job: string,
  unit: T,
  combination: CombinationStatus | undefined,
): T {
  const now = acc.input.now;
  const child = (acc.input.workflowRuns ?? [])
    .filter((w) => w.job === job && w.combination === combination?.id)
    .sort((a, b) => (a.name < b.name ? -1 : 1))
    .find((w) => !unit.workflowRunName || w.name === unit.workflowRunName);
  const done = callOutcome(unit, child, job);
  const named: T = child && !unit.workflowRunName ? { ...unit, workflowRunName: child.name } : unit;
  if (done)
    return concludeUnit(
      { ...named, ...(done.outputs ? { outputs: done.outputs } : {}) },
      done.outcome,
      now,
      done.message,
    );
  if (named.workflowRunName) return named;
  if (acc.cancel || named.stopped)
    return concludeUnit(
      named,
      'cancelled',
      now,
      named.stopped?.message ?? 'not started: the WorkflowRun was cancelled',
    );
  const plan = buildCallWorkflowRun({
    workflowRun: acc.input.workflowRun,
    job,
    jobSpec: acc.input.jobs[job] ?? {},
    ctx: jobContext(acc, job, combination?.matrix),
    lookup: acc.input.workflows ?? (() => undefined),
    callers: callChain(acc.input.workflowRun.annotations),
    ...(combination ? { combination: combination.id } : {}),
  });
  if (plan.kind === 'fail') return concludeUnit(named, 'failure', now, plan.message);
  acc.result.createWorkflowRuns.push({
    job,
    ...(combination ? { combination: combination.id } : {}),
    workflowRun: plan.workflowRun,
  });
  return { ...named, workflowRunName: plan.workflowRun.name };
}

function jobOutputs(
  acc: Acc,
  job: string,
  steps: readonly StepStatus[],
  matrix: CombinationStatus['matrix'] | undefined,
): Record<string, string> {
  const spec = acc.input.jobs[job] as JobSpec;
  const base = jobContext(acc, job, matrix).contexts;
  const ctx: ExpressionContext = { contexts: { ...base, steps: stepsContext(steps, steps.length) } };
  const out: Record<string, string> = {};
  for (const k of Object.keys(spec.outputs ?? {}).sort())
    out[k] = interpolate(spec.outputs?.[k] ?? '', ctx, `jobs.${job}.outputs.${k}`);
  return out;
}

function finishInline<T extends ExecutionStatus>(
  acc: Acc,
  job: string,
  unit: T,
  outcome: Result,
  matrix: CombinationStatus['matrix'] | undefined,
): T {
  const now = acc.input.now;
  if (outcome !== 'success') return concludeUnit(unit, outcome, now);
  try {
    const outputs = jobOutputs(acc, job, unit.steps ?? [], matrix);
    return concludeUnit({ ...unit, ...(Object.keys(outputs).length ? { outputs } : {}) }, 'success', now);
  } catch (e) {
    if (e instanceof ExpressionError)
      return concludeUnit(unit, 'failure', now, `resolve outputs for job "${job}": ${e.message}`);
    throw e;
  }
}

/** Starts (or fails) the step the decision names; returns the unit and whether to keep deciding. */
function startStep<T extends ExecutionStatus>(
  acc: Acc,
  job: string,
  u: T,
  d: { index: number; actionStep?: number; resolve: boolean },
  combination: CombinationStatus | undefined,
): [T, boolean] {
  const { input } = acc;
  const spec = input.jobs[job] as JobSpec;
  const stepSpec = spec.steps?.[d.index];
  const action = stepSpec?.uses !== undefined ? input.action?.(job, stepSpec.name) : undefined;
  const req = {
    workflowRun: input.workflowRun,
    scope: scopeOf(acc, job, combination?.matrix),
    jobSpec: spec,
    unit: u,
    stepIndex: d.index,
    now: input.now,
    ...(action ? { action } : {}),
    ...(combination ? { combination: combination.id } : {}),
    ...withWorkspace(input, job, combination?.id),
  };
  if (d.resolve) return [setStep(u, d.index, (s) => completeActionStep(s, resolveActionOutputs(req), input.now)), true];
  const plan = buildStepRun({ ...req, ...(d.actionStep !== undefined ? { actionStepIndex: d.actionStep } : {}) });
  if (plan.kind === 'wait') return [u, false];
  if (plan.kind === 'fail') {
    return [
      setStep(u, d.index, (s) => ({
        ...s,
        phase: 'Failed',
        outcome: 'failure',
        conclusion: 'failure',
        message: plan.message,
        finishedAt: input.now,
      })),
      true,
    ];
  }
  acc.result.createRuns.push({
    ref: plan.ref,
    stepIndex: d.index,
    ...(d.actionStep !== undefined ? { actionStepIndex: d.actionStep } : {}),
    run: plan.run,
  });
  return [
    setStep(u, d.index, (s) => recordStart(s, plan.run.name, d.actionStep, plan.continueOnError, input.now)),
    false,
  ];
}

/** Projects, times out, skips/fails steps and starts at most one step (or Action step) of a unit. */
function advanceInline<T extends ExecutionStatus>(
  acc: Acc,
  job: string,
  unit: T,
  combination: CombinationStatus | undefined,
): T {
  const { input } = acc;
  const runs = (input.runs ?? []).filter((r) => r.ref.job === job && r.ref.combination === combination?.id);
  let u: T = projectRuns(unit, runs, input.now) as T;
  const spec = input.jobs[job] as JobSpec;
  const scope = scopeOf(acc, job, combination?.matrix);
  for (let guard = 0; guard <= (spec.steps?.length ?? 0) * 2 + 1; guard++) {
    const { steps, decision } = decideSteps(spec, u, scope, input.now);
    u = { ...u, steps };
    if (decision.kind === 'running') return u;
    if (decision.kind === 'done') return finishInline(acc, job, u, decision.outcome, combination?.matrix);
    const d = {
      index: decision.index,
      resolve: decision.kind === 'resolve-action',
      ...(decision.kind === 'start' && decision.actionStep !== undefined ? { actionStep: decision.actionStep } : {}),
    };
    const [next, again] = startStep(acc, job, u, d, combination);
    u = next;
    if (!again) return u;
  }
  return u;
}

function withWorkspace(input: ReconcileInput, job: string, combination: string | undefined): { workspace?: string } {
  const ws = input.workspace?.(job, combination);
  return ws ? { workspace: ws } : {};
}

function setStep<T extends ExecutionStatus>(u: T, index: number, f: (s: StepStatus) => StepStatus): T {
  const steps = [...(u.steps ?? [])];
  const s = steps[index];
  if (s) steps[index] = f(s);
  return { ...u, steps };
}

function recordStart(
  s: StepStatus,
  runName: string,
  actionStep: number | undefined,
  continueOnError: boolean,
  now: string,
): StepStatus {
  const base: StepStatus = {
    ...s,
    phase: 'Running',
    startedAt: s.startedAt ?? now,
    ...(continueOnError ? { continueOnError } : {}),
  };
  if (actionStep === undefined) return { ...base, runName };
  const actionSteps = [...(s.actionSteps ?? [])];
  const a = actionSteps[actionStep];
  if (a) actionSteps[actionStep] = { ...a, phase: 'Running', runName };
  return { ...base, actionSteps };
}

function advanceUnit<T extends ExecutionStatus>(acc: Acc, job: string, unit: T, combination?: CombinationStatus): T {
  if (unit.phase !== 'Running' || isUnitTerminal(unit)) return unit;
  const u = checkDeadline(unit, acc.input.now);
  return acc.input.jobs[job]?.uses !== undefined
    ? advanceCall(acc, job, u, combination)
    : advanceInline(acc, job, u, combination);
}

// ---------------------------------------------------------------------------------------
// Matrix jobs

function uniqueArtifacts(combinations: readonly CombinationStatus[]): Record<string, ArtifactRef> | undefined {
  const count = new Map<string, number>();
  for (const c of combinations) for (const k of Object.keys(c.artifacts ?? {})) count.set(k, (count.get(k) ?? 0) + 1);
  const out: Record<string, ArtifactRef> = {};
  for (const c of combinations)
    for (const [k, v] of Object.entries(c.artifacts ?? {})) if (count.get(k) === 1) out[k] = v;
  return Object.keys(out).length
    ? Object.fromEntries(
        Object.keys(out)
          .sort()
          .map((k) => [k, out[k] as ArtifactRef]),
      )
    : undefined;
}

function advanceMatrix(acc: Acc, job: string, status: JobStatus): JobStatus {
  const now = acc.input.now;
  const strategy = status.strategy ?? { failFast: true };
  // Project running combinations first so a failure observed now drives fail-fast in this pass.
  let combos = (status.combinations ?? []).map((c) => advanceUnit(acc, job, c, c));
  const sched = scheduleCombinations(combos, strategy);
  const failed = combos.find((c) => executionResult(c) === 'failure')?.name ?? '';
  const stop = { reason: 'FailFast' as const, message: `cancelled by fail-fast: ${failed} failed` };
  combos = combos.map((c) => {
    if (sched.abandon.includes(c.id)) return concludeUnit({ ...c, stopped: stop }, 'cancelled', now);
    if (sched.cancel.includes(c.id) && !c.stopped) return advanceUnit(acc, job, { ...c, stopped: stop }, c);
    if (acc.cancel && c.phase !== 'Running' && !isUnitTerminal(c))
      return concludeUnit(c, 'cancelled', now, 'not started: the WorkflowRun was cancelled');
    if (sched.start.includes(c.id) && !acc.cancel)
      return advanceUnit(acc, job, startUnit(acc, job, c, jobContext(acc, job, c.matrix)), c);
    return c;
  });
  const outcome = combinedResult(combos.map((c) => c.outcome ?? executionResult(c)));
  const conclusion = combinedResult(combos.map(executionResult));
  const next: JobStatus = { ...status, combinations: combos };
  if (outcome === null || conclusion === null) return next;
  const outputs = combinedOutputs(combos);
  const artifacts = uniqueArtifacts(combos);
  const msg = combos.find((c) => executionResult(c) !== 'success' && c.message)?.message;
  return {
    ...next,
    phase: outcome === 'success' ? 'Succeeded' : outcome === 'skipped' ? 'Skipped' : 'Failed',
    outcome,
    conclusion,
    finishedAt: now,
    ...(Object.keys(outputs).length ? { outputs } : {}),
    ...(artifacts ? { artifacts } : {}),
    ...(msg && conclusion !== 'success' ? { message: msg } : {}),
  };
}

// ---------------------------------------------------------------------------------------
// Cancellation, conditions, WorkflowRun phase

function activeRuns(acc: Acc, job?: string, combination?: string): ChildRunView[] {
  return (acc.input.runs ?? []).filter(
    (r) =>
      !isTerminal(r.phase) &&
      (job === undefined || (r.ref.job === job && (combination === undefined || r.ref.combination === combination))),
  );
}

function activeWorkflowRuns(acc: Acc, job?: string, combination?: string): ChildWorkflowRunView[] {
  return (acc.input.workflowRuns ?? []).filter(
    (w) =>
      !isTerminalWorkflowRunPhase(w.phase) &&
      (job === undefined || (w.job === job && (combination === undefined || w.combination === combination))),
  );
}

function pushCancels(acc: Acc, reason: CancelReason, job?: string, combination?: string): void {
  const seen = new Set(acc.result.cancel.map((c) => `${c.kind}/${c.name}`));
  const add = (kind: 'Run' | 'WorkflowRun', name: string, requested?: boolean): void => {
    if (requested || seen.has(`${kind}/${name}`)) return;
    seen.add(`${kind}/${name}`);
    acc.result.cancel.push({ kind, name, reason });
  };
  for (const r of activeRuns(acc, job, combination)) add('Run', r.name, r.cancelRequested);
  for (const w of activeWorkflowRuns(acc, job, combination)) add('WorkflowRun', w.name, w.cancelRequested);
}

function collectCancels(acc: Acc): void {
  if (acc.cancel) pushCancels(acc, 'WorkflowRunCancelled');
  for (const [job, s] of Object.entries(acc.statuses).sort(([a], [b]) => (a < b ? -1 : 1))) {
    const units: [ExecutionStatus, string | undefined][] = s.combinations
      ? s.combinations.map((c) => [c, c.id])
      : [[s, undefined]];
    for (const [u, id] of units) {
      if (u.stopped?.reason === 'TimedOut') pushCancels(acc, 'JobTimedOut', job, id ?? undefined);
      if (u.stopped?.reason === 'FailFast') pushCancels(acc, 'FailFast', job, id);
    }
  }
}

function requeueAfter(acc: Acc): number | undefined {
  const now = Date.parse(acc.input.now);
  const deadlines = Object.values(acc.statuses)
    .flatMap((s): ExecutionStatus[] => s.combinations ?? [s])
    .filter((u) => u.phase === 'Running' && u.deadline && !u.stopped && !isUnitTerminal(u))
    .map((u) => Date.parse(u.deadline ?? '') - now);
  return deadlines.length ? Math.max(0, Math.min(...deadlines)) : undefined;
}

function jobReason(s: JobStatus): string {
  const r = executionResult(s);
  if (r === null) return s.phase;
  if (s.stopped?.reason === 'TimedOut' || s.combinations?.some((c) => c.stopped?.reason === 'TimedOut'))
    return 'TimedOut';
  return { success: 'Succeeded', failure: 'Failed', cancelled: 'Cancelled', skipped: 'Skipped' }[r];
}

function withJobCondition(s: JobStatus, now: string, generation?: number): JobStatus {
  const done = executionResult(s) !== null;
  const c = {
    type: CONDITION_COMPLETED,
    status: done ? ('True' as const) : ('False' as const),
    reason: jobReason(s),
    message: done ? (s.message ?? '') : '',
  };
  return { ...s, conditions: condition(s.conditions, c, now, generation) };
}

function workflowPhase(acc: Acc, previous: WorkflowRunPhase): WorkflowRunPhase {
  const jobs = Object.values(acc.statuses);
  const results = jobs.map(executionResult);
  const started =
    previous === 'Running' ||
    jobs.some((s) => s.startedAt !== undefined || (s.phase !== 'Pending' && s.phase !== 'Waiting'));
  const active = activeRuns(acc).length > 0 || activeWorkflowRuns(acc).length > 0;
  if (acc.cancel) return !active && results.every((r) => r !== null) ? 'Cancelled' : started ? 'Running' : 'Pending';
  if (results.length > 0 && results.every((r) => r !== null))
    return results.some((r) => r === 'failure' || r === 'cancelled') ? 'Failed' : 'Succeeded';
  return started ? 'Running' : 'Pending';
}

function workflowMessage(acc: Acc, phase: WorkflowRunPhase): string | undefined {
  if (phase === 'Cancelled') return 'WorkflowRun was cancelled';
  if (phase !== 'Failed') return undefined;
  const job = topologicalOrder(acc.input.jobs).find((j) => {
    const r = executionResult(acc.statuses[j]);
    return r === 'failure' || r === 'cancelled';
  });
  const s = job === undefined ? undefined : acc.statuses[job];
  return job === undefined
    ? 'WorkflowRun failed'
    : `job "${job}" ${executionResult(s) === 'cancelled' ? 'was cancelled' : 'failed'}${s?.message ? `: ${s.message}` : ''}`;
}

/** One reconcile step (see the module comment). A terminal or uninitialized status is returned unchanged. */
export function reconcileStatus(input: ReconcileInput): ReconcileResult {
  const result: ReconcileResult = { status: input.status, createRuns: [], createWorkflowRuns: [], cancel: [] };
  if (!input.status.jobs || isTerminalWorkflowRunPhase(input.status.phase)) return result;
  const acc: Acc = { input, cancel: input.cancelRequested === true, statuses: { ...input.status.jobs }, result };
  for (const job of topologicalOrder(input.jobs)) {
    let s: JobStatus = acc.statuses[job] ?? { phase: 'Pending' };
    if (isUndecided(s)) s = applyVerdict(acc, job, s);
    if (s.phase === 'Running' && executionResult(s) === null)
      s = s.combinations ? advanceMatrix(acc, job, s) : advanceUnit(acc, job, s);
    acc.statuses[job] = s;
  }
  for (const job of Object.keys(acc.statuses))
    acc.statuses[job] = withJobCondition(acc.statuses[job] as JobStatus, input.now, input.workflowRun.generation);
  collectCancels(acc);
  const phase = workflowPhase(acc, input.status.phase);
  const message = workflowMessage(acc, phase) ?? input.status.message;
  const done = isTerminalWorkflowRunPhase(phase);
  const completed = {
    type: CONDITION_COMPLETED,
    status: done ? ('True' as const) : ('False' as const),
    reason: acc.cancel && !done ? 'Cancelling' : phase,
    message: done ? (message ?? '') : '',
  };
  const requeueAfterMs = requeueAfter(acc);
  result.status = {
    ...input.status,
    phase,
    jobs: acc.statuses,
    conditions: condition(input.status.conditions, completed, input.now, input.workflowRun.generation),
    ...(message ? { message } : {}),
  };
  if (requeueAfterMs !== undefined) result.requeueAfterMs = requeueAfterMs;
  return result;
}
