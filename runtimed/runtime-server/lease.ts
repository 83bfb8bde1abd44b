/**
 * The execution lease of a Runtime Server (fencing, like a kubelet's node lease): runtimed
 * renews it only after the API server accepted its heartbeat, with a validity that ends no later
 * than FENCE_MS after the heartbeat's lastProbeTime. When it lapses, every execution is killed
 * and new ones are refused until runtimed renews again, so a runtimed that is stopped or cut off
 * from the API server cannot keep a Run executing past the reaper's staleness bound
 * (docs/adr/0011-run-fencing-and-artifact-cleanup.md has the timing argument).
 * Until the first renewal the lease is not armed (nothing is fenced).
 *
 * A renewal carries the deadline runtimed computed when it sent it, on CLOCK_MONOTONIC (one clock
 * for every process of the node's kernel: runtimed and the Runtime Server are containers of one
 * Pod). The Runtime Server never holds the lease past it, so a renewal it processes late (stopped,
 * starved of CPU) grants no more than runtimed did (docs/adr/0038-lease-renewal-carries-its-deadline.md).
 */
export interface LeaseClock {
  /** Milliseconds on CLOCK_MONOTONIC (monotonicMs), the clock of a renewal's deadline. */
  now(): number;
  setTimer(fn: () => void, ms: number): { cancel(): void };
}

/** CLOCK_MONOTONIC in milliseconds (process.hrtime; Python's time.monotonic_ns): shared by the Pod's processes. */
export const monotonicMs = (): number => Number(process.hrtime.bigint()) / 1e6;

export const monotonicClock: LeaseClock = {
  now: monotonicMs,
  setTimer: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref();
    return { cancel: () => clearTimeout(t) };
  },
};

/** The longest validity a renewal may ask for (a runaway value would disable fencing). */
export const MAX_LEASE_MS = 60_000;

/**
 * Pure: when a renewal processed at `now` ends the lease: `validForMs` from now, and never later
 * than the deadline its sender computed (`sentDeadline`, same clock) when it sent one (an older
 * runtimed does not). A renewal processed after that deadline ends the lease at once.
 */
export function renewalDeadline(now: number, validForMs: number, sentDeadline?: number): number {
  const bound = now + Math.max(0, validForMs);
  return sentDeadline === undefined ? bound : Math.min(bound, sentDeadline);
}

/** A lease renewal as runtimed sends it: `POST /v1/lease {validForMs, deadlineNs?}`. */
export interface Renewal {
  validForMs: number;
  /** The deadline on CLOCK_MONOTONIC in milliseconds, from the body's `deadlineNs` (decimal nanoseconds). */
  deadlineMs?: number;
}

/** Pure: a renewal's body, or what is wrong with it. */
export function parseRenewal(body: { validForMs?: unknown; deadlineNs?: unknown }): Renewal | string {
  if (typeof body.validForMs !== 'number') return 'validForMs (a number) is required';
  if (body.deadlineNs === undefined) return { validForMs: body.validForMs };
  if (typeof body.deadlineNs !== 'string' || !/^\d{1,25}$/.test(body.deadlineNs))
    return 'deadlineNs must be CLOCK_MONOTONIC nanoseconds as a decimal string';
  return { validForMs: body.validForMs, deadlineMs: Number(body.deadlineNs) / 1e6 };
}

export class ExecutionLease {
  private deadline?: number;
  private timer?: { cancel(): void };

  constructor(
    private readonly onExpire: () => void,
    private readonly clock: LeaseClock = monotonicClock,
  ) {}

  /**
   * Extends the lease by validForMs from now, but not past `sentDeadline` (the clock's time the
   * sender computed; renewalDeadline). 0 or less, or a deadline that passed, expires it at once.
   * Throws on a bad value.
   */
  renew(validForMs: number, sentDeadline?: number): void {
    if (!Number.isFinite(validForMs) || validForMs > MAX_LEASE_MS)
      throw new RangeError(`validForMs must be a number of milliseconds up to ${MAX_LEASE_MS}`);
    if (sentDeadline !== undefined && !Number.isFinite(sentDeadline))
      throw new RangeError('the deadline must be a number of milliseconds');
    this.timer?.cancel();
    const now = this.clock.now();
    this.deadline = renewalDeadline(now, validForMs, sentDeadline);
    this.timer = this.clock.setTimer(() => this.check(), Math.max(0, this.deadline - now));
  }

  /** Whether executions are fenced: the lease was armed and has lapsed. */
  expired(): boolean {
    return this.deadline !== undefined && this.clock.now() >= this.deadline;
  }

  /** Milliseconds left, or undefined when never armed. */
  remainingMs(): number | undefined {
    return this.deadline === undefined ? undefined : Math.max(0, this.deadline - this.clock.now());
  }

  private check(): void {
    const left = this.remainingMs() ?? 0;
    if (left > 0) this.timer = this.clock.setTimer(() => this.check(), left);
    else this.onExpire();
  }
}
