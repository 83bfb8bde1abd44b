/**
 * How soon the adapter looks at a live sandbox again. The Lifecycle API has no watch, so the
 * adapter polls: fast while the execution is young (a short Job's end is seen within a fraction
 * of a second), then backing off exponentially to a cap, so a long-running sandbox costs one list
 * per POLL_MAX_MS. The delay is a fixed fraction of the execution's age, so poll times grow
 * geometrically (each at 1 + POLL_AGE_FRACTION times the previous age) and nothing has to be
 * stored between invocations: a restarted controller continues the same schedule.
 */
export const POLL_MIN_MS = 250;
export const POLL_MAX_MS = 10_000;
export const POLL_AGE_FRACTION = 0.25;

/** The delay before the next observation of an execution that is `ageMs` old. */
export function pollDelayMs(ageMs: number): number {
  if (!Number.isFinite(ageMs) || ageMs <= 0) return POLL_MIN_MS;
  return Math.min(POLL_MAX_MS, Math.max(POLL_MIN_MS, Math.round(ageMs * POLL_AGE_FRACTION)));
}

/** Age of an execution that started at `startTime` (unknown start: treated as new). */
export function executionAgeMs(startTime: string | undefined, now: Date): number {
  const t = startTime ? Date.parse(startTime) : NaN;
  return Number.isNaN(t) ? 0 : now.getTime() - t;
}
