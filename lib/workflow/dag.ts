/**
 * The job graph of a WorkflowRun: validation (unknown job, self-dependency, cycles with the
 * cycle path), deterministic topological order, ancestors, and readiness: which waiting jobs
 * can start, which are skipped (a need did not succeed and the job's `if:` does not opt in with
 * failure()/always()/cancelled(), or the `if:` is false), which will never start because the
 * WorkflowRun is cancelled, and which `if:` conditions could not be evaluated.
 *
 * Validation is a depth-first search over jobs in sorted order with sorted needs (as upstream),
 * so the same graph always yields the same first error.
 */
import { executionResult, contexts, jobsContext, needsContext } from './context.ts';
import { evaluateCondition, ExpressionError, parseCondition, type StatusFunctions } from './expressions.ts';
import type { JobStatus, JobsSpec, Result } from './types.ts';

export type DagErrorCode = 'unknown-job' | 'self-dependency' | 'cycle';

export class DagError extends Error {
  constructor(
    readonly code: DagErrorCode,
    message: string,
    readonly path: readonly string[],
  ) {
    super(message);
    this.name = 'DagError';
  }
}

type Needs = Readonly<Record<string, { needs?: readonly string[] }>>;

const sorted = (xs: Iterable<string>): string[] => [...new Set(xs)].sort();

function needsOf(jobs: Needs, job: string): string[] {
  return sorted(jobs[job]?.needs ?? []);
}

/**
 * First problem of the job graph, or undefined. Messages:
 * `job "a" needs unknown job "b"`, `job "a" needs itself`,
 * `workflow job dependency cycle: a -> b -> a`.
 */
export function jobGraphProblem(jobs: Needs): DagError | undefined {
  const state = new Map<string, 'visiting' | 'done'>();
  const stack: string[] = [];
  const visit = (job: string): DagError | undefined => {
    if (state.get(job) === 'done') return undefined;
    if (state.get(job) === 'visiting') {
      const cycle = [...stack.slice(stack.indexOf(job)), job];
      return new DagError('cycle', `workflow job dependency cycle: ${cycle.join(' -> ')}`, cycle);
    }
    state.set(job, 'visiting');
    stack.push(job);
    for (const dep of needsOf(jobs, job)) {
      if (dep === job) return new DagError('self-dependency', `job "${job}" needs itself`, [job, job]);
      if (!Object.hasOwn(jobs, dep))
        return new DagError('unknown-job', `job "${job}" needs unknown job "${dep}"`, [job, dep]);
      const err = visit(dep);
      if (err) return err;
    }
    stack.pop();
    state.set(job, 'done');
    return undefined;
  };
  for (const job of sorted(Object.keys(jobs))) {
    const err = visit(job);
    if (err) return err;
  }
  return undefined;
}

export function validateJobGraph(jobs: Needs): void {
  const err = jobGraphProblem(jobs);
  if (err) throw err;
}

/**
 * Topological order (needs first); among jobs whose needs are all placed, the lexically
 * smallest comes first (Kahn's algorithm with a sorted frontier). Throws DagError on an
 * invalid graph.
 */
export function topologicalOrder(jobs: Needs): string[] {
  validateJobGraph(jobs);
  const remaining = new Map(Object.keys(jobs).map((j) => [j, new Set(needsOf(jobs, j))]));
  const out: string[] = [];
  while (remaining.size > 0) {
    const next = sorted([...remaining].filter(([, deps]) => deps.size === 0).map(([j]) => j))[0];
    if (next === undefined) break;
    remaining.delete(next);
    out.push(next);
    for (const deps of remaining.values()) deps.delete(next);
  }
  return out;
}

/** Transitive needs of a job, sorted. */
export function ancestors(jobs: Needs, job: string): string[] {
  const seen = new Set<string>();
  const todo = needsOf(jobs, job);
  for (let dep = todo.pop(); dep !== undefined; dep = todo.pop()) {
    if (seen.has(dep)) continue;
    seen.add(dep);
    todo.push(...needsOf(jobs, dep));
  }
  return sorted(seen);
}

/** Jobs that (transitively) need `job`, sorted. */
export function dependents(jobs: Needs, job: string): string[] {
  return sorted(Object.keys(jobs).filter((j) => ancestors(jobs, j).includes(job)));
}

/** GitHub result of a job for `needs.<job>.result`; null while the job is not terminal. */
export function jobResult(status: Pick<JobStatus, 'phase' | 'conclusion'> | undefined): Result | null {
  return executionResult(status);
}

/** Status functions for a job-level `if:` over the results of all ancestors. */
export function jobStatusFunctions(results: readonly (Result | null)[], cancelRequested: boolean): StatusFunctions {
  return {
    success: results.every((r) => r === 'success'),
    failure: results.some((r) => r === 'failure'),
    cancelled: cancelRequested,
  };
}

export interface ReadinessInput {
  jobs: JobsSpec;
  /** Current job statuses (missing = Pending). */
  statuses: Readonly<Record<string, JobStatus>>;
  cancelRequested?: boolean;
}

export type SkipReason = 'NeedsNotSuccessful' | 'ConditionFalse';

export interface Readiness {
  /** Waiting jobs whose needs are terminal and whose `if:` is true: start them. */
  ready: string[];
  /** Jobs to mark Skipped (transitively: a job skipped here counts as skipped for its dependents). */
  skipped: { job: string; reason: SkipReason; message: string }[];
  /** Jobs that will never start because the WorkflowRun is cancelled (upstream keeps their phase). */
  cancelled: string[];
  /** Jobs whose `if:` could not be evaluated: fail them with the message. */
  failed: { job: string; message: string; error: ExpressionError }[];
  /** Jobs still waiting for needs to finish. */
  waiting: string[];
}

export function isUndecided(s: Pick<JobStatus, 'phase' | 'conclusion'> | undefined): boolean {
  return !s || ((s.phase === 'Pending' || s.phase === 'Waiting') && s.conclusion === undefined);
}

export type JobVerdict =
  | { kind: 'wait' | 'ready' | 'cancel' }
  | { kind: 'skip'; reason: SkipReason; message: string }
  | { kind: 'fail'; error: ExpressionError };

/**
 * Readiness of one undecided job given the current statuses: wait while a need is not terminal;
 * under cancellation never start (upstream: cancellation is a hard stop, no new children);
 * otherwise evaluate `if:` (default success() over all ancestors) with the needs and jobs contexts.
 */
export function decideJob(
  jobs: JobsSpec,
  job: string,
  statuses: Readonly<Record<string, JobStatus>>,
  cancelRequested: boolean,
): JobVerdict {
  const needs = needsOf(jobs, job);
  if (needs.some((n) => jobResult(statuses[n]) === null)) return { kind: 'wait' };
  if (cancelRequested) return { kind: 'cancel' };
  const spec = jobs[job];
  const anc = ancestors(jobs, job);
  const status = jobStatusFunctions(
    anc.map((a) => jobResult(statuses[a])),
    false,
  );
  const ctx = {
    contexts: contexts({ needs: needsContext(needs, statuses), jobs: jobsContext(anc, statuses) }),
    status,
  };
  const field = `jobs.${job}.if`;
  try {
    if (evaluateCondition(spec?.if, ctx, field)) return { kind: 'ready' };
  } catch (e) {
    if (e instanceof ExpressionError) return { kind: 'fail', error: e };
    throw e;
  }
  const notOk = anc.filter((a) => jobResult(statuses[a]) !== 'success');
  const reliesOnSuccess = !spec?.if?.trim() || parseCondition(spec.if, field).implicitSuccess;
  if (notOk.length > 0 && reliesOnSuccess) {
    const detail = notOk.map((n) => `"${n}" (${jobResult(statuses[n]) ?? 'unknown'})`).join(', ');
    return {
      kind: 'skip',
      reason: 'NeedsNotSuccessful',
      message: `skipped: job(s) it depends on did not succeed: ${detail}`,
    };
  }
  return {
    kind: 'skip',
    reason: 'ConditionFalse',
    message: `skipped: if condition ${JSON.stringify(spec?.if ?? 'success()')} evaluated to false`,
  };
}

/**
 * Readiness of every undecided (Pending/Waiting) job, in topological order so that a job
 * skipped (or cancelled) now is already seen that way by its dependents.
 */
export function computeReadiness(input: ReadinessInput): Readiness {
  const cancel = input.cancelRequested === true;
  const statuses: Record<string, JobStatus> = { ...input.statuses };
  const out: Readiness = { ready: [], skipped: [], cancelled: [], failed: [], waiting: [] };
  for (const job of topologicalOrder(input.jobs)) {
    if (!isUndecided(statuses[job])) continue;
    const d = decideJob(input.jobs, job, statuses, cancel);
    if (d.kind === 'wait') out.waiting.push(job);
    else if (d.kind === 'ready') out.ready.push(job);
    else if (d.kind === 'cancel') {
      out.cancelled.push(job);
      statuses[job] = { phase: statuses[job]?.phase ?? 'Pending', conclusion: 'cancelled' };
    } else if (d.kind === 'fail') {
      out.failed.push({ job, message: d.error.message, error: d.error });
      statuses[job] = { phase: 'Failed', conclusion: 'failure' };
    } else if (d.kind === 'skip') {
      out.skipped.push({ job, reason: d.reason, message: d.message });
      statuses[job] = { phase: 'Skipped', conclusion: 'skipped' };
    }
  }
  return out;
}
