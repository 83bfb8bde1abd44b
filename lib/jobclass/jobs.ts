/** Job status helpers shared by the acceptance function and the adapters. */
import type { Operation } from '../fn/types.ts';
import type { Condition } from '../run/conditions.ts';
import { X, type Job, type JobStatus, type Phase } from './api.ts';
import {
  conditionEvents,
  eventOp,
  involvedOf,
  isTrue,
  sameJson,
  withConditions,
  type ConditionInput,
  type EventSpec,
} from './events.ts';

export const isFinished = (s: JobStatus | undefined): boolean =>
  isTrue(s?.conditions, 'Succeeded') || isTrue(s?.conditions, 'Failed');
export const isAccepted = (s: JobStatus | undefined): boolean => isTrue(s?.conditions, 'Accepted');

/** The phase implied by the conditions (and whether the execution was seen running). */
export function phaseOf(conditions: Condition[] | undefined, running = false): Phase {
  if (isTrue(conditions, 'Succeeded')) return 'Succeeded';
  if (isTrue(conditions, 'Failed')) return 'Failed';
  if (isTrue(conditions, 'ResultUnknown')) return 'Unknown';
  if (running) return 'Running';
  return isTrue(conditions, 'Scheduled') ? 'Scheduled' : 'Pending';
}

/** Applies condition updates to a status, recomputing phase and message. */
export function updateStatus(
  job: Job,
  updates: ConditionInput[],
  now: Date,
  extra: Partial<JobStatus> = {},
  running?: boolean,
): JobStatus {
  const prev = job.status ?? {};
  const conditions = withConditions(prev.conditions, updates, now, job.metadata.generation);
  const wasRunning = prev.phase === 'Running';
  const last = updates[updates.length - 1];
  return {
    ...prev,
    ...extra,
    observedGeneration: job.metadata.generation ?? prev.observedGeneration ?? 0,
    conditions,
    phase: phaseOf(conditions, running ?? wasRunning),
    ...(last ? { message: last.message } : {}),
  };
}

/** A terminal status: Succeeded or Failed with a reason; clears ResultUnknown and stamps completionTime. */
export interface Result {
  reason: string;
  message: string;
}

export function finish(
  job: Job,
  outcome: 'Succeeded' | 'Failed',
  r: Result,
  now: Date,
  extra: Partial<JobStatus> = {},
): JobStatus {
  const updates: ConditionInput[] = [{ type: outcome, status: 'True', reason: r.reason, message: r.message }];
  if (isTrue(job.status?.conditions, 'ResultUnknown'))
    updates.unshift({
      type: 'ResultUnknown',
      status: 'False',
      reason: 'ResultObserved',
      message: 'the execution result was observed',
    });
  return updateStatus(
    job,
    updates,
    now,
    { completionTime: job.status?.completionTime ?? now.toISOString(), ...extra },
    false,
  );
}

/** The status write plus one Event per condition transition (Events first: they are idempotent). */
export function statusOps(
  job: Job,
  next: JobStatus,
  now: Date,
  component: string,
  extraEvents: EventSpec[] = [],
): Operation[] {
  if (sameJson(job.status ?? {}, next) && !extraEvents.length) return [];
  const involved = involvedOf(job, 'execution.ayatori.ddupan.top/v1alpha1', 'Job');
  const events = [...conditionEvents(job.status?.conditions, next.conditions ?? []), ...extraEvents].map((e) =>
    eventOp(involved, e, now, component),
  );
  const write: Operation[] = sameJson(job.status ?? {}, next)
    ? []
    : [{ op: 'status', resource: X.jobs, object: { ...job, status: next } }];
  return [...events, ...write];
}
