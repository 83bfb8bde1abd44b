/**
 * The execution lease of a Runtime Server (fencing, like a kubelet's node lease): runtimed
 * renews it only after the API server accepted its heartbeat, with a validity that ends no later
 * than FENCE_MS after the heartbeat's lastProbeTime. When it lapses, every execution is killed
 * and new ones are refused until runtimed renews again, so a runtimed that is stopped or cut off
 * from the API server cannot keep a Run executing past the reaper's staleness bound
 * (docs/adr/0011-run-fencing-and-artifact-cleanup.md has the timing argument).
 * Until the first renewal the lease is not armed (nothing is fenced).
 */
export interface LeaseClock {
  /** Monotonic milliseconds. */
  now(): number;
  setTimer(fn: () => void, ms: number): { cancel(): void };
}

export const monotonicClock: LeaseClock = {
  now: () => performance.now(),
  setTimer: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref();
    return { cancel: () => clearTimeout(t) };
  },
};

/** The longest validity a renewal may ask for (a runaway value would disable fencing). */
export const MAX_LEASE_MS = 60_000;

export class ExecutionLease {
  private deadline?: number;
  private timer?: { cancel(): void };

  constructor(
    private readonly onExpire: () => void,
    private readonly clock: LeaseClock = monotonicClock,
  ) {}

  /** Extends the lease by validForMs from now (0 or less expires it at once). Throws on a bad value. */
  renew(validForMs: number): void {
    if (!Number.isFinite(validForMs) || validForMs > MAX_LEASE_MS)
      throw new RangeError(`validForMs must be a number of milliseconds up to ${MAX_LEASE_MS}`);
    this.timer?.cancel();
    this.deadline = this.clock.now() + Math.max(0, validForMs);
    this.timer = this.clock.setTimer(() => this.check(), Math.max(0, validForMs));
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
