/**
 * Fencing a Run to one execution at a time. Two mechanisms, both needed:
 * - The execution lease (runtime-server/lease.ts): runtimed renews it only after the API server
 *   accepted its heartbeat, so its validity ends FENCE_MS after the heartbeat's lastProbeTime;
 *   the reaper reschedules only STALE_MS (30 s) after that same lastProbeTime. A runtimed that is
 *   stopped or cut off therefore has its executions killed before the reaper may reschedule them.
 * - The attempt token: a Run the reaper took away (reset to Pending, next attempt, maybe back on
 *   this very Pod) is never adopted by the Active that ran the old attempt; its status writes are
 *   resourceVersion-guarded and a conflict that shows another attempt ends the old one silently.
 */
import { currentAttempt } from '../lib/run/retry.ts';
import type { Run } from './types.ts';

import { FENCE_MS } from '../lib/run/fencing.ts';

export { FENCE_MS };

/** The validity to ask the Runtime Server for: FENCE_MS counted from when the heartbeat was stamped. */
export function leaseValidity(probedAt: number, now: number, fenceMs = FENCE_MS): number {
  return Math.max(0, fenceMs - Math.max(0, now - probedAt));
}

/**
 * Renewals in heartbeat order. A heartbeat answered late (runtimed stopped, an API server that
 * stalled) would renew the lease from its older stamp after a fresher heartbeat had renewed it,
 * cutting the lease short on both sides. Only a heartbeat stamped after the last one that renewed
 * may renew.
 */
export class RenewalOrder {
  private last = -Infinity;

  /** Whether the heartbeat stamped at probedAt may renew; records it when it may. */
  admit(probedAt: number): boolean {
    if (probedAt <= this.last) return false;
    this.last = probedAt;
    return true;
  }
}

/**
 * The lease a launch needs left. A renewal that follows a stall (the heartbeat it rests on was
 * stamped before runtimed was stopped) may be valid for moments only; an execution started then
 * is killed as fenced at once, and its Run retried for nothing. A fresh heartbeat renews within
 * milliseconds of that one, so waiting for it costs a launch almost nothing.
 */
export const LAUNCH_MIN_LEASE_MS = FENCE_MS / 4;

/** Whether runtimed may start an execution: the lease was never armed, or has minMs or more left. */
export function mayLaunch(leaseUntil: number | undefined, now: number, minMs = LAUNCH_MIN_LEASE_MS): boolean {
  return leaseUntil === undefined || leaseUntil - now >= minMs;
}

/**
 * Whether `observed` (a newer version of the Run) belongs to another execution than the one
 * `held` describes: it was reassigned (other Pod UID), put back to Pending, or rescheduled to a
 * later attempt (Pending/Scheduled again). runtimed's own in-place retries stay Running on the
 * same Pod and are not a take-over.
 */
export function takenAway(held: Run, observed: Run): boolean {
  const h = held.status ?? {};
  const o = observed.status ?? {};
  if (!o.assignedPod) return true;
  if (h.assignedPod && o.assignedPod !== h.assignedPod) return true;
  if (h.assignedPodUID && o.assignedPodUID && o.assignedPodUID !== h.assignedPodUID) return true;
  if (o.phase === 'Pending') return true;
  const later = currentAttempt(o.attempt) > currentAttempt(h.attempt);
  return later && o.phase === 'Scheduled';
}

/** What a runtimed does with a Scheduled Run of its Pod that it does not run yet. */
export type Resume = 'adopt' | 'lost' | 'launch';

/**
 * A Run created after this runtimed started has never been launched: launch it. An older one
 * may have been launched by the runtimed before (restarted since): adopt the execution if the
 * Runtime Server still has it; otherwise, if its Run directory records that this attempt was
 * launched (written just before the execution starts, removed with the directory only after the
 * result was written) it ran and its result is lost: it must not run again in the same attempt
 * (the retry policy decides, as a new attempt). Without that record it never started: launch it.
 */
export function resumeDecision(o: { createdBeforeStart: boolean; serverHasIt: boolean; launched: boolean }): Resume {
  if (!o.createdBeforeStart) return 'launch';
  if (o.serverHasIt) return 'adopt';
  return o.launched ? 'lost' : 'launch';
}

/**
 * The attempts this runtimed has finished with, per Run UID: a version of the Run that arrives
 * after the Run was released (a watch that lags behind runtimed's own writes, or a GET answered
 * late under load) still shows it Scheduled, and must not start the same attempt again (the
 * 30-minute soak's duplicated execution: one runtimed, one attempt, two executions 3.8 s apart).
 * A new attempt (the reaper's reschedule, an in-place retry) is a higher number and runs.
 * Bounded: the oldest entries go first; stale versions arrive within seconds, not after
 * thousands of other Runs.
 */
export class SettledAttempts {
  private readonly attempts = new Map<string, number>();
  constructor(private readonly limit = 10_000) {}

  settle(uid: string, attempt: number): void {
    this.attempts.delete(uid);
    this.attempts.set(uid, attempt);
    if (this.attempts.size > this.limit) {
      const oldest = this.attempts.keys().next().value;
      if (oldest !== undefined) this.attempts.delete(oldest);
    }
  }

  /** Whether this version of the Run asks for an attempt this runtimed already finished with. */
  finished(run: Run): boolean {
    const done = this.attempts.get(run.metadata.uid ?? '');
    return done !== undefined && currentAttempt(run.status?.attempt) <= done;
  }

  forget(uid: string): void {
    this.attempts.delete(uid);
  }
}
