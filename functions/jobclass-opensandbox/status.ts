/** Status, Event and requeue building blocks of the OpenSandbox adapter. */
import type { Operation } from '../../lib/fn/types.ts';
import { OPENSANDBOX_CONTROLLER, type ExecutionRef, type Job, type JobStatus } from '../../lib/jobclass/api.ts';
import { eventOp, involvedOf, type ConditionInput } from '../../lib/jobclass/events.ts';
import { finish, statusOps, updateStatus, type Result } from '../../lib/jobclass/jobs.ts';
import type { Problem } from '../../lib/jobclass/resolve.ts';

export const COMPONENT = 'jobclass-opensandbox';

export const requeue = (ms: number): Operation => ({ op: 'requeue', afterMs: Math.max(1, Math.round(ms)) });

export function afterStatus(
  job: Job,
  updates: ConditionInput[],
  now: Date,
  extra: Partial<JobStatus> = {},
  running?: boolean,
): Operation[] {
  return statusOps(job, updateStatus(job, updates, now, extra, running), now, COMPONENT);
}

export function scheduledFalse(job: Job, p: Problem, now: Date, extra: Partial<JobStatus> = {}): Operation[] {
  return afterStatus(job, [{ type: 'Scheduled', status: 'False', reason: p.reason, message: p.message }], now, extra);
}

export function unknownOps(job: Job, p: Problem, now: Date): Operation[] {
  return afterStatus(
    job,
    [{ type: 'ResultUnknown', status: 'True', reason: p.reason, message: p.message }],
    now,
    {},
    false,
  );
}

export function finishOps(
  job: Job,
  outcome: 'Succeeded' | 'Failed',
  r: Result,
  now: Date,
  extra: Partial<JobStatus> = {},
): Operation[] {
  return statusOps(job, finish(job, outcome, r, now, extra), now, COMPONENT);
}

/** A Warning that deleting the Job waits for backend cleanup that cannot run right now. */
export function cleanupBlocked(job: Job, p: Problem, now: Date): Operation {
  return eventOp(
    involvedOf(job, 'execution.ayatori.ddupan.top/v1alpha1', 'Job'),
    {
      type: 'Warning',
      reason: 'CleanupBlocked',
      key: `${job.metadata.deletionTimestamp ?? ''}|${p.reason}`,
      message: `deleting the Job waits until its sandbox is deleted, but ${p.message}; removing the finalizer by hand is an administrator recovery step`,
    },
    now,
    COMPONENT,
  );
}

/** The execution reference with the create intent's outcome replaced. */
export function withIntent(job: Job, outcome: 'Pending' | 'Rejected'): ExecutionRef {
  const exec = job.status?.execution ?? { controllerName: OPENSANDBOX_CONTROLLER };
  return exec.createIntent ? { ...exec, createIntent: { ...exec.createIntent, outcome } } : exec;
}
