/**
 * Pure decision core of the OpenSandbox adapter: (observed Job + class + parameters + the last
 * list of the Job's sandboxes) -> one backend action (observe, create, delete) plus status
 * writes, Events, finalizer edits and requeues. It performs no I/O: effects.ts runs the action
 * with an injected client and feeds the outcome back through `afterAction`.
 *
 * Exactly-once creation without an idempotency key upstream:
 * 1. every sandbox carries the Job UID in its metadata, and a create is always preceded, in the
 *    same invocation, by a list of the Job's sandboxes; a found sandbox is adopted (the oldest;
 *    younger duplicates are deleted), never created again;
 * 2. before the first create of an attempt, an intent {attempt, requestedAt} is persisted in
 *    status; a create may only be sent within CREATE_WINDOW_MS of its intent, and a new intent is
 *    only written once MAX_CREATE_MS more have passed without the sandbox appearing, so a create
 *    still in flight when a controller crashed has finished (and is listable) before anyone can
 *    create again.
 * A recorded sandbox that cannot be observed is ResultUnknown; it is never re-run elsewhere.
 */
import type { Operation, State } from '../../lib/fn/types.ts';
import type { EndpointPolicy } from '../../lib/opensandbox/endpoint.ts';
import type { CreateSandboxRequest } from '../../lib/opensandbox/types.ts';
import {
  OPENSANDBOX_CONTROLLER,
  SANDBOX_FINALIZER,
  X,
  type ExecutionRef,
  type Job,
  type JobClass,
} from '../../lib/jobclass/api.ts';
import { isTrue, type ConditionInput } from '../../lib/jobclass/events.ts';
import { addFinalizer, removeFinalizer } from '../../lib/jobclass/finalizers.ts';
import { isAccepted, isFinished } from '../../lib/jobclass/jobs.ts';
import { classGate, type Problem } from '../../lib/jobclass/resolve.ts';
import { connectionFor, currentBackend, mayHaveExecution, type Connection } from './connection.ts';
import { POLL_MAX_MS, executionAgeMs, pollDelayMs } from './poll.ts';
import { buildCreateRequest, materials } from './request.ts';
import { afterStatus, cleanupBlocked, finishOps, requeue, scheduledFalse, unknownOps, withIntent } from './status.ts';

export { COMPONENT } from './status.ts';
export const CREATE_WINDOW_MS = 15_000;
export const MAX_CREATE_MS = 180_000;
/** Poll period of executions whose state is not expected to change soon (unknown results, waits). */
export const POLL_MS = POLL_MAX_MS;
export const RETRY_MS = 15_000;
/** A delete issued for cancel/deadline is re-issued when the sandbox is still live after this. */
export const REISSUE_MS = 30_000;

export interface SandboxView {
  id: string;
  state: string;
  reason?: string;
  message?: string;
  createdAt: string;
}
export interface BackendFailure {
  kind: string;
  message: string;
  retryAfterMs?: number;
  outcomeUnknown?: boolean;
}
export type Observation = { kind: 'listed'; sandboxes: SandboxView[] } | { kind: 'failed'; error: BackendFailure };

export interface Input {
  job: Job | undefined;
  state: State;
  now: Date;
  policy: EndpointPolicy;
  observation?: Observation;
}

export type DeleteWhy = 'cancel' | 'deadline' | 'duplicate' | 'cleanup' | 'failed';
export type Action =
  | { type: 'observe'; connection: Connection }
  | { type: 'create'; connection: Connection; request: CreateSandboxRequest }
  | { type: 'delete'; connection: Connection; ids: string[]; why: DeleteWhy; sandbox?: SandboxView };

export interface Decision {
  ops: Operation[];
  action?: Action;
}
export type ActionResult = { ok: true; created?: SandboxView } | { ok: false; error: BackendFailure };

export const isOpenSandboxJob = (j: Job | undefined): boolean =>
  j?.status?.resolvedJobClass?.controllerName === OPENSANDBOX_CONTROLLER;
const LIVE_EXCLUDED = new Set(['Terminated', 'Stopping']);
/** Sandboxes that still need a DELETE (not terminated and not already stopping). */
export const needsDelete = (s: SandboxView): boolean => !LIVE_EXCLUDED.has(s.state);
const byAge = (a: SandboxView, b: SandboxView): number =>
  a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id);

/** A create may still be in flight (or land) for the recorded intent. */
export function intentAge(job: Job, now: Date): number | undefined {
  const i = job.status?.execution?.createIntent;
  return i?.outcome === 'Pending' ? now.getTime() - Date.parse(i.requestedAt) : undefined;
}

/** Decisions that need no backend: not ours, finished, finalizer bookkeeping. */
function gate(job: Job | undefined): Decision | undefined {
  if (!job || !isOpenSandboxJob(job) || !isAccepted(job.status)) return { ops: [] };
  if (isFinished(job.status)) return { ops: removeFinalizer(X.jobs, job, SANDBOX_FINALIZER) };
  if (job.metadata.deletionTimestamp && !mayHaveExecution(job))
    return { ops: removeFinalizer(X.jobs, job, SANDBOX_FINALIZER) };
  if (!job.metadata.deletionTimestamp && !job.metadata.finalizers?.includes(SANDBOX_FINALIZER))
    return { ops: addFinalizer(X.jobs, job, SANDBOX_FINALIZER) };
  return undefined;
}

/** When the backend cannot be reached or used: wait before an execution exists, ResultUnknown after. */
function unusable(job: Job, p: Problem, now: Date): Decision {
  if (job.metadata.deletionTimestamp) return { ops: [cleanupBlocked(job, p, now), requeue(RETRY_MS)] };
  if (mayHaveExecution(job)) return { ops: [...unknownOps(job, p, now), requeue(RETRY_MS)] };
  return { ops: [...scheduledFalse(job, p, now), requeue(RETRY_MS)] };
}

function failureProblem(e: BackendFailure): Problem {
  if (e.kind === 'unauthorized' || e.kind === 'forbidden')
    return { reason: 'BackendAuthenticationFailed', message: `OpenSandbox rejected the API key: ${e.message}` };
  return { reason: 'BackendUnreachable', message: `OpenSandbox could not be queried: ${e.message}` };
}

export function decide(inp: Input): Decision {
  const early = gate(inp.job);
  if (early) return early;
  const job = inp.job!;
  const conn = connectionFor(job, inp.state, inp.policy);
  if ('problem' in conn) return unusable(job, conn.problem, inp.now);
  if (!inp.observation) return { ops: [], action: { type: 'observe', connection: conn } };
  if (inp.observation.kind === 'failed') {
    const e = inp.observation.error;
    // 429: the server is alive and only busy; nothing about the Job changed, so nothing flips.
    if (e.kind === 'rate-limited') return { ops: [requeue(Math.max(1000, e.retryAfterMs ?? RETRY_MS))] };
    return unusable(job, failureProblem(e), inp.now);
  }
  return decideListed(job, inp, conn, [...inp.observation.sandboxes].sort(byAge));
}

function decideListed(job: Job, inp: Input, conn: Connection, sorted: SandboxView[]): Decision {
  if (job.metadata.deletionTimestamp) return cleanup(job, inp.now, conn, sorted);
  const recorded = job.status?.execution?.sandboxID;
  if (!recorded) return sorted.length ? adopt(job, inp.now, conn, sorted) : noSandbox(job, inp, conn);
  const extras = sorted.filter((s) => s.id !== recorded && needsDelete(s));
  if (extras.length)
    return { ops: [], action: { type: 'delete', connection: conn, ids: extras.map((s) => s.id), why: 'duplicate' } };
  const primary = sorted.find((s) => s.id === recorded);
  if (!primary) return missing(job, inp.now);
  return observeSandbox(job, inp.now, conn, primary);
}

function cleanup(job: Job, now: Date, conn: Connection, sorted: SandboxView[]): Decision {
  const live = sorted.filter(needsDelete);
  if (live.length)
    return { ops: [], action: { type: 'delete', connection: conn, ids: live.map((s) => s.id), why: 'cleanup' } };
  if (sorted.some((s) => s.state === 'Stopping')) return { ops: [requeue(2000)] };
  const age = intentAge(job, now);
  if (!job.status?.execution?.sandboxID && age !== undefined && age < CREATE_WINDOW_MS + MAX_CREATE_MS)
    return { ops: [requeue(CREATE_WINDOW_MS + MAX_CREATE_MS - age)] };
  return { ops: removeFinalizer(X.jobs, job, SANDBOX_FINALIZER) };
}

function adopt(job: Job, now: Date, conn: Connection, sorted: SandboxView[]): Decision {
  const [oldest, ...rest] = sorted as [SandboxView, ...SandboxView[]];
  const exec: ExecutionRef = {
    ...(job.status?.execution ?? { controllerName: OPENSANDBOX_CONTROLLER }),
    controllerName: OPENSANDBOX_CONTROLLER,
    kind: 'Sandbox',
    sandboxID: oldest.id,
    endpoint: conn.endpoint,
    apiKeySecretRef: conn.apiKeySecretRef,
  };
  const c: ConditionInput = {
    type: 'Scheduled',
    status: 'True',
    reason: 'SandboxCreated',
    message: `sandbox ${oldest.id} (found by its Job UID tag)`,
  };
  const ops = [
    ...afterStatus(
      job,
      [c],
      now,
      { execution: exec, startTime: job.status?.startTime ?? oldest.createdAt },
      oldest.state !== 'Pending',
    ),
    requeue(1),
  ];
  const dups = rest.filter(needsDelete);
  return dups.length
    ? { ops, action: { type: 'delete', connection: conn, ids: dups.map((s) => s.id), why: 'duplicate' } }
    : { ops };
}

/** Why no new sandbox may be created now, or the request to send. */
export function preflight(
  job: Job,
  state: State,
  conn: Connection,
): { problem: Problem } | { request: CreateSandboxRequest } {
  const frozen = job.status!.resolvedJobClass!;
  const cls = state.get(X.jobClasses, undefined, frozen.name) as JobClass | undefined;
  const gate = classGate(frozen, cls);
  if (gate) return { problem: gate };
  const m = materials(job, conn.params, state);
  if (!m.ok) return { problem: m.problem };
  return { request: buildCreateRequest(job, conn.params, m.m) };
}

/**
 * A create of the current intent may not be sent now. If no send of this intent has a recorded
 * result yet (Scheduled is still CreatingSandbox), nothing was sent: the intent is Rejected and a
 * new one may follow. Otherwise an earlier send may have landed: the intent stays Pending, so it
 * is listed for (on its recorded backend) until it expires before anything is created again.
 */
function blockedResend(job: Job, p: Problem, now: Date): Decision {
  const scheduled = job.status?.conditions?.find((c) => c.type === 'Scheduled');
  const untried = !scheduled || scheduled.reason === 'CreatingSandbox';
  const extra = untried ? { execution: withIntent(job, 'Rejected') } : {};
  return { ops: [...scheduledFalse(job, p, now, extra), requeue(RETRY_MS)] };
}

function noSandbox(job: Job, inp: Input, conn: Connection): Decision {
  const age = intentAge(job, inp.now);
  const inFlight = age !== undefined && age < CREATE_WINDOW_MS + MAX_CREATE_MS;
  if (job.spec.cancelRequested) {
    if (inFlight)
      return {
        ops: [
          ...afterStatus(job, [], inp.now, {
            message: 'cancelling: waiting to learn whether the last create took effect',
          }),
          requeue(POLL_MS),
        ],
      };
    return {
      ops: finishOps(
        job,
        'Failed',
        { reason: 'Cancelled', message: 'cancelled before a sandbox was created; nothing ran' },
        inp.now,
      ),
    };
  }
  if (age !== undefined && age <= CREATE_WINDOW_MS) {
    const pf = preflight(job, inp.state, conn);
    if ('problem' in pf) return blockedResend(job, pf.problem, inp.now);
    return { ops: [], action: { type: 'create', connection: conn, request: pf.request } };
  }
  if (inFlight) {
    const p = {
      reason: 'CreateOutcomeUnknown',
      message: 'an earlier create may still take effect; waiting before creating again',
    };
    return {
      ops: [...scheduledFalse(job, p, inp.now), requeue(Math.min(POLL_MS, CREATE_WINDOW_MS + MAX_CREATE_MS - age))],
    };
  }
  const pf = preflight(job, inp.state, conn);
  if ('problem' in pf) return { ops: [...scheduledFalse(job, pf.problem, inp.now), requeue(RETRY_MS)] };
  const attempt = (job.status?.execution?.createIntent?.attempt ?? 0) + 1;
  // A new attempt targets the parameters' current backend: the recorded one (if any) was just
  // listed empty after its last intent expired, so nothing of this Job can appear there any more.
  const execution: ExecutionRef = {
    controllerName: OPENSANDBOX_CONTROLLER,
    kind: 'Sandbox',
    ...currentBackend(conn.params),
    createIntent: { attempt, requestedAt: inp.now.toISOString(), outcome: 'Pending' },
  };
  const p = { reason: 'CreatingSandbox', message: `creating the sandbox (attempt ${attempt})` };
  return { ops: [...scheduledFalse(job, p, inp.now, { execution }), requeue(1)] };
}

function missing(job: Job, now: Date): Decision {
  const exec = job.status?.execution;
  if (exec?.cancelIssuedAt) {
    const cancelled = !!job.spec.cancelRequested;
    return {
      ops: finishOps(
        job,
        'Failed',
        {
          reason: cancelled ? 'Cancelled' : 'DeadlineExceeded',
          message: cancelled
            ? 'cancelled; the sandbox was deleted'
            : 'activeDeadlineSeconds exceeded; the sandbox was deleted',
        },
        now,
      ),
    };
  }
  return {
    ops: [
      ...unknownOps(
        job,
        {
          reason: 'SandboxNotFound',
          message: `sandbox ${exec?.sandboxID ?? '?'} is no longer listed; its result cannot be observed and it is not re-created`,
        },
        now,
      ),
      requeue(POLL_MS),
    ],
  };
}

function stopIssued(job: Job, now: Date): boolean {
  const at = job.status?.execution?.cancelIssuedAt;
  return !!at && now.getTime() - Date.parse(at) < REISSUE_MS;
}

function deadlinePassed(job: Job, now: Date): boolean {
  const d = job.spec.activeDeadlineSeconds;
  const start = job.status?.startTime;
  return !!d && !!start && now.getTime() >= Date.parse(start) + d * 1000;
}

function observeSandbox(job: Job, now: Date, conn: Connection, s: SandboxView): Decision {
  if (s.state === 'Terminated') return { ops: terminalOutcome(job, s, now) };
  if (s.state === 'Failed')
    return { ops: [], action: { type: 'delete', connection: conn, ids: [s.id], why: 'failed', sandbox: s } };
  const why: DeleteWhy | undefined = job.spec.cancelRequested
    ? 'cancel'
    : deadlinePassed(job, now)
      ? 'deadline'
      : undefined;
  if (why)
    return stopIssued(job, now)
      ? { ops: [requeue(2000)] }
      : { ops: [], action: { type: 'delete', connection: conn, ids: [s.id], why } };
  const updates: ConditionInput[] = [
    { type: 'Scheduled', status: 'True', reason: 'SandboxCreated', message: `sandbox ${s.id} is ${s.state}` },
  ];
  if (isTrue(job.status?.conditions, 'ResultUnknown'))
    updates.push({
      type: 'ResultUnknown',
      status: 'False',
      reason: 'SandboxObserved',
      message: `sandbox ${s.id} is observable again`,
    });
  return {
    ops: [
      ...afterStatus(job, updates, now, {}, s.state !== 'Pending'),
      requeue(pollDelayMs(executionAgeMs(job.status?.startTime, now))),
    ],
  };
}

/** Maps a finished sandbox to the Job result (the lifecycle API reports no exit code). */
export function terminalOutcome(job: Job, s: SandboxView, now: Date): Operation[] {
  const detail = `sandbox ${s.id} ${s.state}${s.reason ? ` (${s.reason}${s.message ? `: ${s.message}` : ''})` : ''}`;
  if (job.status?.execution?.cancelIssuedAt) {
    return finishOps(
      job,
      'Failed',
      { reason: job.spec.cancelRequested ? 'Cancelled' : 'DeadlineExceeded', message: detail },
      now,
    );
  }
  if (s.state === 'Failed' || /error|fail|timeout|oom|kill/i.test(s.reason ?? ''))
    return finishOps(job, 'Failed', { reason: 'SandboxFailed', message: detail }, now);
  if (s.reason === 'ttl_expiry') return finishOps(job, 'Failed', { reason: 'DeadlineExceeded', message: detail }, now);
  if (s.reason === 'user_delete')
    return [
      ...unknownOps(
        job,
        {
          reason: 'SandboxDeletedExternally',
          message: `${detail}: deleted outside the adapter, the result is unknown`,
        },
        now,
      ),
      requeue(POLL_MS),
    ];
  return finishOps(job, 'Succeeded', { reason: 'Completed', message: detail }, now);
}
