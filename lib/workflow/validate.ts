/**
 * Initialize-time validation of WorkflowRun jobs (before any child exists), so definition
 * mistakes fail the WorkflowRun with Accepted=False instead of surfacing mid-run. Order (first
 * problem wins, jobs sorted): job shape (upstream messages), job graph, unique step names,
 * Action references, artifact imports, literal matrices, then every expression field: syntax,
 * functions, contexts allowed in that field, and literal references to steps (earlier steps of
 * the same job), needs (listed needs), jobs (ancestors) and matrix keys (literal matrices).
 */
import { ArtifactError, validateArtifactImports } from './artifacts.ts';
import { ancestors, DagError, jobGraphProblem } from './dag.ts';
import {
  checkCondition,
  checkTemplate,
  collectReferences,
  ExpressionError,
  type ContextName,
  type ExprNode,
} from './expressions.ts';
import { expandMatrix, MatrixError } from './matrix.ts';
import type { ActionSnapshot } from './runs.ts';
import type { JobSpec, JobsSpec, StepSpec } from './types.ts';

const isDefinitionError = (e: unknown): e is Error =>
  e instanceof WorkflowValidationError ||
  e instanceof ExpressionError ||
  e instanceof MatrixError ||
  e instanceof ArtifactError ||
  e instanceof DagError;

export class WorkflowValidationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WorkflowValidationError';
  }
}

function shapeProblem(job: string, spec: JobSpec): string | undefined {
  if (spec.uses !== undefined) {
    if (spec['runs-on'] !== undefined || spec.steps?.length)
      return `job "${job}" uses reusable workflow "${spec.uses}" and may not set runs-on or steps`;
    return undefined;
  }
  if (!spec['runs-on']) return `job "${job}" must set runs-on before creating child Runs`;
  if (!spec.steps?.length) return `job "${job}" must contain at least one step before creating child Runs`;
  const seen = new Set<string>();
  for (const s of spec.steps) {
    if (seen.has(s.name)) return `job "${job}" has more than one step named "${s.name}"`;
    seen.add(s.name);
  }
  return undefined;
}

/** Allowed literal references; an absent list is not checked. */
interface Scope {
  job: string;
  needs?: string[];
  ancestors?: string[];
  earlierSteps: string[];
  matrixKeys?: string[];
}

function literalMatrixKeys(job: string, spec: JobSpec): string[] | undefined {
  const m = spec.strategy?.matrix;
  if (m === undefined) return [];
  if (typeof m === 'string' || JSON.stringify(m).includes('${{')) return undefined;
  const keys = new Set<string>();
  for (const c of expandMatrix(job, m)) for (const k of Object.keys(c.values)) keys.add(k);
  return [...keys].sort();
}

function checkReferences(asts: ExprNode[], scope: Scope, field: string): void {
  for (const ast of asts) {
    for (const r of collectReferences(ast)) {
      const [first] = r.path;
      if (first === undefined) continue;
      const bad = (noun: string, allowed: string[]): WorkflowValidationError =>
        new WorkflowValidationError(
          `${field}: ${r.context}.${first} does not name ${noun} (${allowed.length ? `allowed: ${allowed.join(', ')}` : 'none available'})`,
        );
      if (r.context === 'needs' && scope.needs && !scope.needs.includes(first))
        throw bad(`a job in the needs of job "${scope.job}"`, scope.needs);
      if (r.context === 'jobs' && scope.ancestors && !scope.ancestors.includes(first))
        throw bad(`a job that job "${scope.job}" depends on`, scope.ancestors);
      if (r.context === 'steps' && !scope.earlierSteps.includes(first))
        throw bad(
          `an earlier step of ${scope.job.startsWith('Action ') ? scope.job : `job "${scope.job}"`}`,
          scope.earlierSteps,
        );
      if (r.context === 'matrix' && scope.matrixKeys && !scope.matrixKeys.includes(first))
        throw bad(`a matrix key of job "${scope.job}"`, scope.matrixKeys);
    }
  }
}

function field(
  text: string | boolean | number | undefined,
  name: string,
  contexts: readonly ContextName[],
  scope: Scope,
): void {
  if (typeof text !== 'string') return;
  checkReferences(checkTemplate(text, name, { contexts }), scope, name);
}

const JOB_CTX: ContextName[] = ['needs', 'jobs'];
const UNIT_CTX: ContextName[] = ['needs', 'jobs', 'matrix'];
const STEP_CTX: ContextName[] = ['steps', 'needs', 'jobs', 'matrix'];

function deepStrings(v: unknown, path: string, out: [string, string][]): [string, string][] {
  if (typeof v === 'string') out.push([path, v]);
  else if (Array.isArray(v)) v.forEach((e, i) => deepStrings(e, `${path}[${i}]`, out));
  else if (v !== null && typeof v === 'object')
    for (const [k, e] of Object.entries(v)) deepStrings(e, `${path}.${k}`, out);
  return out;
}

function checkStep(step: StepSpec, i: number, scope: Scope): void {
  const p = `jobs.${scope.job}.steps[${i}]`;
  checkReferences([checkCondition(step.if, `${p}.if`, STEP_CTX).ast], scope, `${p}.if`);
  field(step['continue-on-error'], `${p}.continue-on-error`, STEP_CTX, scope);
  field(step['timeout-minutes'], `${p}.timeout-minutes`, STEP_CTX, scope);
  for (const k of Object.keys(step.env ?? {}).sort()) field(step.env?.[k], `${p}.env.${k}`, STEP_CTX, scope);
  for (const k of Object.keys(step.with ?? {}).sort()) field(step.with?.[k], `${p}.with.${k}`, STEP_CTX, scope);
  const withEnv: ContextName[] = [...STEP_CTX, 'env'];
  field(step.run, `${p}.run`, withEnv, scope);
  (step.args ?? []).forEach((a, k) => field(a, `${p}.args[${k}]`, withEnv, scope));
}

function checkJobExpressions(jobs: JobsSpec, job: string): void {
  const spec = jobs[job] as JobSpec;
  const scope: Scope = {
    job,
    needs: [...new Set(spec.needs ?? [])].sort(),
    ancestors: ancestors(jobs, job),
    earlierSteps: [],
  };
  checkReferences([checkCondition(spec.if, `jobs.${job}.if`, JOB_CTX).ast], scope, `jobs.${job}.if`);
  for (const [p, v] of deepStrings(spec.strategy, `jobs.${job}.strategy`, [])) field(v, p, JOB_CTX, scope);
  const matrixKeys = literalMatrixKeys(job, spec);
  const unit: Scope = { ...scope, ...(matrixKeys ? { matrixKeys } : {}) };
  field(spec['continue-on-error'], `jobs.${job}.continue-on-error`, UNIT_CTX, unit);
  field(spec['timeout-minutes'], `jobs.${job}.timeout-minutes`, UNIT_CTX, unit);
  for (const k of Object.keys(spec.with ?? {}).sort()) field(spec.with?.[k], `jobs.${job}.with.${k}`, UNIT_CTX, unit);
  (spec.steps ?? []).forEach((s, i) =>
    checkStep(s, i, { ...unit, earlierSteps: (spec.steps ?? []).slice(0, i).map((x) => x.name) }),
  );
  const allSteps = { ...unit, earlierSteps: (spec.steps ?? []).map((x) => x.name) };
  for (const k of Object.keys(spec.outputs ?? {}).sort())
    field(spec.outputs?.[k], `jobs.${job}.outputs.${k}`, STEP_CTX, allSteps);
}

/**
 * First problem of the jobs, or undefined. `actionExists(job, step, uses)` tells whether the
 * Action of an Action-call step was resolved (omit to skip that check).
 */
export function workflowRunProblem(
  jobs: JobsSpec,
  actionExists?: (job: string, step: string, uses: string) => boolean,
): string | undefined {
  const names = Object.keys(jobs).sort();
  if (names.length === 0) return 'a WorkflowRun needs at least one job';
  try {
    for (const job of names) {
      const p = shapeProblem(job, jobs[job] as JobSpec);
      if (p) return p;
    }
    const dag = jobGraphProblem(jobs);
    if (dag) return dag.message;
    for (const job of names) {
      for (const s of jobs[job]?.steps ?? []) {
        if (s.uses !== undefined && actionExists && !actionExists(job, s.name, s.uses))
          return `Action "${s.uses}" for step "${s.name}" in job "${job}" does not exist`;
      }
    }
    validateArtifactImports(jobs);
    for (const job of names) checkJobExpressions(jobs, job);
  } catch (e) {
    if (isDefinitionError(e)) return e.message;
    throw e;
  }
  return undefined;
}

/**
 * Problems of an Action used by a step (upstream messages): at least one step, run steps only,
 * unique step names; expressions may read inputs, earlier Action steps, needs, jobs, matrix
 * (and env in run/args).
 */
export function actionProblem(action: ActionSnapshot): string | undefined {
  const steps = action.spec.steps;
  if (steps.length === 0) return `Action "${action.name}" must contain at least one step`;
  const seen = new Set<string>();
  for (const st of steps) {
    if (st.run === undefined || st.uses !== undefined || st.with !== undefined)
      return `Action "${action.name}" step "${st.name}" must set run and may not use another Action`;
    if (seen.has(st.name)) return `Action "${action.name}" step name "${st.name}" is duplicated`;
    seen.add(st.name);
  }
  try {
    const ctx: ContextName[] = ['inputs', 'steps', 'needs', 'jobs', 'matrix'];
    steps.forEach((st, i) => {
      const scope: Scope = { job: `Action ${action.name}`, earlierSteps: steps.slice(0, i).map((x) => x.name) };
      const only = (asts: ExprNode[], f: string): void => checkReferences(asts, scope, f);
      const p = `actions.${action.name}.steps[${i}]`;
      for (const k of Object.keys(st.env ?? {}).sort())
        only(checkTemplate(st.env?.[k] ?? '', `${p}.env.${k}`, { contexts: ctx }), `${p}.env.${k}`);
      only(checkTemplate(st.run ?? '', `${p}.run`, { contexts: [...ctx, 'env'] }), `${p}.run`);
      (st.args ?? []).forEach((a, k) =>
        only(checkTemplate(a, `${p}.args[${k}]`, { contexts: [...ctx, 'env'] }), `${p}.args[${k}]`),
      );
    });
    for (const k of Object.keys(action.spec.outputs ?? {}).sort())
      checkTemplate(action.spec.outputs?.[k]?.value ?? '', `actions.${action.name}.outputs.${k}`, {
        contexts: ['inputs', 'steps', 'needs', 'jobs', 'matrix'],
      });
  } catch (e) {
    if (isDefinitionError(e)) return e.message;
    throw e;
  }
  return undefined;
}
