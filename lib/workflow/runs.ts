/**
 * Builds the child Run of one step (or of one Action-internal step): deterministic name and
 * labels, runtime from `runs-on`, `run` → source.inline, args, env (sorted EnvVars), artifact
 * inputs resolved from needs, timeout from timeout-minutes / the job deadline, and the evaluated
 * continue-on-error. Expression or input problems fail the step with upstream's message form
 * `resolve step "s" in job "j": <error>`; a producer that has not finished means wait.
 */
import type { Run } from '../api/generated/kruntimes.ts';
import { resolveStepArtifacts } from './artifacts.ts';
import { bindInputs, CallError } from './calls.ts';
import { contexts, envContext, inputsContext, stepsContext } from './context.ts';
import { ExpressionError, interpolate, type ExpressionContext } from './expressions.ts';
import { childRunLabels, childRunName, type StepRef } from './names.ts';
import { evaluateFlag, evaluateMinutes, stepContexts, stepRunTimeout, type JobScope } from './steps.ts';
import type { ExecutionStatus, InputSpec, JobSpec, StepSpec, StepStatus } from './types.ts';

/** An Action as frozen in the execution snapshot. */
export interface ActionSnapshot {
  name: string;
  spec: { inputs?: Record<string, InputSpec>; outputs?: Record<string, { value: string }>; steps: StepSpec[] };
}

export interface StepRunRequest {
  workflowRun: { name: string; uid: string };
  scope: JobScope;
  jobSpec: JobSpec;
  unit: ExecutionStatus;
  combination?: string;
  stepIndex: number;
  /** Action-call steps: the internal step to run and the Action from the snapshot. */
  actionStepIndex?: number;
  action?: ActionSnapshot;
  /** Job-local PersistentWorkspace every Run of the job references (optional). */
  workspace?: string;
  now: string;
}

export interface ChildRunManifest {
  name: string;
  labels: Record<string, string>;
  spec: Run['spec'];
}

export type StepRunPlan =
  | { kind: 'create'; run: ChildRunManifest; ref: StepRef; continueOnError: boolean }
  | { kind: 'wait'; message: string }
  | { kind: 'fail'; message: string };

const isResolveError = (e: unknown): e is Error => e instanceof ExpressionError || e instanceof CallError;

/** The inputs of an Action call: the step's `with` evaluated in the step context, then bound. */
export function actionInputs(
  step: StepSpec,
  action: ActionSnapshot,
  ctx: ExpressionContext,
  field: string,
): Record<string, string> {
  const values: Record<string, string> = {};
  for (const k of Object.keys(step.with ?? {}).sort())
    values[k] = interpolate(step.with?.[k] ?? '', ctx, `${field}.with.${k}`);
  return bindInputs(action.spec.inputs, values);
}

/** Contexts inside an Action: its inputs and earlier Action steps, plus the caller's needs/jobs/matrix. */
export function actionContexts(
  base: ExpressionContext['contexts'],
  inputs: Record<string, string>,
  step: StepStatus,
  index: number,
): ExpressionContext['contexts'] {
  const inner: StepStatus[] = (step.actionSteps ?? []).map((a) => ({
    name: a.name,
    phase: a.phase,
    ...(a.outputs ? { outputs: a.outputs } : {}),
  }));
  return { ...base, inputs: inputsContext(inputs), steps: stepsContext(inner, index) };
}

function resolveEnv(
  env: Record<string, string> | undefined,
  ctx: ExpressionContext,
  field: string,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of Object.keys(env ?? {}).sort()) out[k] = interpolate(env?.[k] ?? '', ctx, `${field}.env.${k}`);
  return out;
}

interface Target {
  spec: StepSpec;
  ctx: ExpressionContext;
  field: string;
  ref: StepRef;
}

function target(req: StepRunRequest, step: StepSpec, base: ExpressionContext['contexts']): Target {
  const job = req.scope.job;
  const field = `jobs.${job}.steps[${req.stepIndex}]`;
  const ref: StepRef = {
    job,
    step: step.name,
    ...(req.combination !== undefined ? { combination: req.combination } : {}),
  };
  if (step.uses === undefined) return { spec: step, ctx: { contexts: base }, field, ref };
  const action = req.action;
  const k = req.actionStepIndex ?? 0;
  const inner = action?.spec.steps[k];
  if (!action || !inner)
    throw new CallError(
      'invalid-job',
      `Action "${step.uses}" for step "${step.name}" in job "${job}" is missing from the execution snapshot or has no step ${k}`,
    );
  const inputs = actionInputs(step, action, { contexts: base }, field);
  const status = req.unit.steps?.[req.stepIndex] ?? { name: step.name, phase: 'Pending' };
  return {
    spec: inner,
    ctx: { contexts: actionContexts(base, inputs, status, k) },
    field: `${field}.uses(${action.name}).steps[${k}]`,
    ref: { ...ref, actionStep: inner.name },
  };
}

function manifest(
  req: StepRunRequest,
  t: Target,
  timeout: string | undefined,
  artifactInputs: NonNullable<Run['spec']['artifactInputs']>,
): ChildRunManifest {
  const env = resolveEnv(t.spec.env, t.ctx, t.field);
  const ctx: ExpressionContext = { contexts: { ...t.ctx.contexts, ...contexts({ env: envContext(env) }) } };
  const inline = interpolate(t.spec.run ?? '', ctx, `${t.field}.run`);
  const args = (t.spec.args ?? []).map((a, i) => interpolate(a, ctx, `${t.field}.args[${i}]`));
  return {
    name: childRunName(req.workflowRun.name, t.ref),
    labels: childRunLabels(req.workflowRun.uid, t.ref),
    spec: {
      runtime: req.jobSpec['runs-on'] ?? '',
      source: { inline },
      mode: { task: args.length ? { args } : {} },
      ...(Object.keys(env).length ? { env: Object.entries(env).map(([name, value]) => ({ name, value })) } : {}),
      ...(artifactInputs.length ? { artifactInputs } : {}),
      ...(timeout ? { timeout } : {}),
      ...(req.workspace
        ? {
            workspace: {
              name: req.workspace,
              kind: 'PersistentWorkspace' as const,
              apiGroup: 'kruntimes.io/v1alpha1' as const,
            },
          }
        : {}),
    },
  };
}

/** Plans the child Run of step `stepIndex` (see the module comment). */
export function buildStepRun(req: StepRunRequest): StepRunPlan {
  const step = req.jobSpec.steps?.[req.stepIndex];
  const job = req.scope.job;
  if (!step) return { kind: 'fail', message: `job "${job}" has no step ${req.stepIndex}` };
  const base = stepContexts(req.scope, req.unit.steps, req.stepIndex);
  try {
    const t = target(req, step, base);
    const outerCtx: ExpressionContext = { contexts: base };
    const continueOnError = evaluateFlag(
      step['continue-on-error'],
      outerCtx,
      `jobs.${job}.steps[${req.stepIndex}].continue-on-error`,
    );
    const minutes = evaluateMinutes(
      step['timeout-minutes'],
      outerCtx,
      `jobs.${job}.steps[${req.stepIndex}].timeout-minutes`,
    );
    const artifacts =
      step.uses === undefined
        ? resolveStepArtifacts(req.scope.jobs, job, step, req.scope.statuses)
        : { kind: 'resolved' as const, inputs: [] };
    if (artifacts.kind === 'wait') return { kind: 'wait', message: artifacts.message };
    if (artifacts.kind === 'fail') return { kind: 'fail', message: artifacts.error.message };
    const run = manifest(req, t, stepRunTimeout(minutes, req.unit.deadline, req.now), artifacts.inputs);
    return { kind: 'create', run, ref: t.ref, continueOnError };
  } catch (e) {
    if (isResolveError(e))
      return { kind: 'fail', message: `resolve step "${step.name}" in job "${job}": ${e.message}` };
    throw e;
  }
}

/**
 * Outputs of an Action-call step once all its internal steps succeeded: the Action's output
 * expressions over its inputs (re-resolved) and internal steps' outputs.
 */
export function resolveActionOutputs(
  req: Omit<StepRunRequest, 'actionStepIndex'>,
): { outputs: Record<string, string> } | { error: string } {
  const step = req.jobSpec.steps?.[req.stepIndex];
  const action = req.action;
  const job = req.scope.job;
  if (!step || !action)
    return { error: `Action for step ${req.stepIndex} in job "${job}" is missing from the execution snapshot` };
  const base = stepContexts(req.scope, req.unit.steps, req.stepIndex);
  const field = `jobs.${job}.steps[${req.stepIndex}]`;
  try {
    const inputs = actionInputs(step, action, { contexts: base }, field);
    const status = req.unit.steps?.[req.stepIndex] ?? { name: step.name, phase: 'Pending' as const };
    const ctx: ExpressionContext = { contexts: actionContexts(base, inputs, status, status.actionSteps?.length ?? 0) };
    const outputs: Record<string, string> = {};
    for (const k of Object.keys(action.spec.outputs ?? {}).sort())
      outputs[k] = interpolate(action.spec.outputs?.[k]?.value ?? '', ctx, `actions.${action.name}.outputs.${k}`);
    return { outputs };
  } catch (e) {
    if (isResolveError(e))
      return {
        error: `resolve outputs of Action "${action.name}" for step "${step.name}" in job "${job}": ${e.message}`,
      };
    throw e;
  }
}
