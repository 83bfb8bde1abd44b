/**
 * Timers owned by one object and cancelled together (a Pod's, a container's). A timer leaves the
 * set when it fires, so a loop that schedules one per period (a readiness probe every second for
 * the life of a container) keeps one entry, not one per period it has run.
 */
export class TimerSet {
  private readonly pending = new Set<NodeJS.Timeout>();

  /** Runs f after ms unless clear() comes first. */
  after(ms: number, f: () => void): void {
    const t = setTimeout(() => {
      this.pending.delete(t);
      f();
    }, ms);
    this.pending.add(t);
  }

  /** Cancels every timer not yet fired. */
  clear(): void {
    for (const t of this.pending) clearTimeout(t);
    this.pending.clear();
  }

  /** Timers not yet fired. */
  get size(): number {
    return this.pending.size;
  }
}
