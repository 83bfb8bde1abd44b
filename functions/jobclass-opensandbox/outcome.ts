/**
 * Pure: the status after a backend action ran (create / delete), given its result. A create
 * that definitely failed marks the intent Rejected (a new attempt may start at once); one whose
 * outcome is unknown leaves the intent Pending, so the next invocation lists before anything is
 * created again. HTTP 429 (pool exhausted) is a clear PoolExhausted condition retried after
 * Retry-After, never a class Ready flip.
 */
import type { Operation } from '../../lib/fn/types.ts';
import { OPENSANDBOX_CONTROLLER, type ExecutionRef, type Job } from '../../lib/jobclass/api.ts';
import { eventOp, involvedOf } from '../../lib/jobclass/events.ts';
import { RETRY_MS, terminalOutcome, type Action, type ActionResult, type BackendFailure } from './core.ts';
import type { Backend } from './connection.ts';
import { pollDelayMs } from './poll.ts';
import { afterStatus, cleanupBlocked, COMPONENT, finishOps, requeue, scheduledFalse, withIntent } from './status.ts';

export const DEFAULT_RETRY_AFTER_MS = 10_000;
const MAX_RETRY_AFTER_MS = 300_000;

function createFailed(job: Job, e: BackendFailure, poolRef: string | undefined, now: Date): Operation[] {
  if (e.outcomeUnknown) {
    return [
      ...scheduledFalse(
        job,
        {
          reason: 'CreateOutcomeUnknown',
          message: `the create request got no definite answer (${e.message}); listing before any new create`,
        },
        now,
      ),
      requeue(5000),
    ];
  }
  const rejected = { execution: withIntent(job, 'Rejected') };
  switch (e.kind) {
    case 'rate-limited': {
      const wait = Math.min(MAX_RETRY_AFTER_MS, Math.max(1000, e.retryAfterMs ?? DEFAULT_RETRY_AFTER_MS));
      const msg = `OpenSandbox${poolRef ? ` pool ${poolRef}` : ''} has no free capacity (${e.message}); retrying in ${Math.round(wait / 1000)} s`;
      return [...scheduledFalse(job, { reason: 'PoolExhausted', message: msg }, now, rejected), requeue(wait)];
    }
    case 'invalid':
      return finishOps(
        job,
        'Failed',
        { reason: 'BackendRejected', message: `OpenSandbox rejected the sandbox request: ${e.message}` },
        now,
        rejected,
      );
    case 'unauthorized':
    case 'forbidden':
      return [
        ...scheduledFalse(
          job,
          { reason: 'BackendAuthenticationFailed', message: `OpenSandbox rejected the API key: ${e.message}` },
          now,
          rejected,
        ),
        requeue(RETRY_MS),
      ];
    default:
      return [
        ...scheduledFalse(
          job,
          { reason: 'BackendError', message: `creating the sandbox failed: ${e.message}` },
          now,
          rejected,
        ),
        requeue(RETRY_MS),
      ];
  }
}

function created(job: Job, backend: Backend, id: string, state: string, now: Date): Operation[] {
  const exec: ExecutionRef = {
    ...(job.status?.execution ?? { controllerName: OPENSANDBOX_CONTROLLER }),
    controllerName: OPENSANDBOX_CONTROLLER,
    kind: 'Sandbox',
    sandboxID: id,
    endpoint: backend.endpoint,
    apiKeySecretRef: backend.apiKeySecretRef,
  };
  return [
    ...afterStatus(
      job,
      [{ type: 'Scheduled', status: 'True', reason: 'SandboxCreated', message: `sandbox ${id} is ${state}` }],
      now,
      { execution: exec, startTime: job.status?.startTime ?? now.toISOString() },
      state !== 'Pending',
    ),
    requeue(pollDelayMs(0)),
  ];
}

function deleted(job: Job, action: Extract<Action, { type: 'delete' }>, now: Date): Operation[] {
  switch (action.why) {
    case 'duplicate':
      return [
        eventOp(
          involvedOf(job, 'execution.ayatori.ddupan.top/v1alpha1', 'Job'),
          {
            type: 'Warning',
            reason: 'DuplicateSandboxDeleted',
            key: action.ids.join(','),
            message: `deleted sandbox(es) ${action.ids.join(', ')} tagged with this Job; only ${job.status?.execution?.sandboxID ?? 'the oldest'} is kept`,
          },
          now,
          COMPONENT,
        ),
        requeue(1),
      ];
    case 'cleanup':
      return [requeue(1000)];
    case 'failed':
      return terminalOutcome(job, action.sandbox ?? { id: action.ids[0] ?? '', state: 'Failed', createdAt: '' }, now);
    default: {
      const exec = {
        ...(job.status?.execution ?? { controllerName: OPENSANDBOX_CONTROLLER }),
        cancelIssuedAt: now.toISOString(),
      };
      const message =
        action.why === 'cancel'
          ? 'cancelling: the sandbox is being deleted'
          : 'activeDeadlineSeconds exceeded: the sandbox is being deleted';
      return [...afterStatus(job, [], now, { execution: exec, message }), requeue(2000)];
    }
  }
}

function deleteFailed(
  job: Job,
  action: Extract<Action, { type: 'delete' }>,
  e: BackendFailure,
  now: Date,
): Operation[] {
  const p = {
    reason: e.kind === 'unauthorized' || e.kind === 'forbidden' ? 'BackendAuthenticationFailed' : 'BackendUnreachable',
    message: `deleting sandbox(es) ${action.ids.join(', ')} failed: ${e.message}`,
  };
  if (action.why === 'cleanup') return [cleanupBlocked(job, p, now), requeue(RETRY_MS)];
  return [...afterStatus(job, [], now, { message: p.message }), requeue(RETRY_MS)];
}

/** Operations after `action` ran with `result`. */
export function afterAction(
  job: Job,
  action: Exclude<Action, { type: 'observe' }>,
  result: ActionResult,
  now: Date,
): Operation[] {
  if (action.type === 'create') {
    if (!result.ok) return createFailed(job, result.error, action.connection.params.spec.poolRef, now);
    return created(job, action.connection, result.created?.id ?? '', result.created?.state ?? 'Pending', now);
  }
  return result.ok ? deleted(job, action, now) : deleteFailed(job, action, result.error, now);
}
