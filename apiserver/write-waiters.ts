/**
 * Read-your-writes for the watch relay without polling: a wait for an informer store to hold a
 * version of an object at least as new as the one a function wrote is woken by the stores'
 * deltas for that object (and by a deadline), instead of re-checking the stores on every turn of
 * the event loop, which kept the extension server's thread busy for as long as each echo took.
 */
export interface WaitClock {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(t: unknown): void;
}
const realClock: WaitClock = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (t) => clearTimeout(t as NodeJS.Timeout),
};

interface Waiter {
  held: () => boolean;
  done: () => void;
}

export class WriteWaiters {
  private readonly waiting = new Map<string, Set<Waiter>>();

  constructor(private readonly clock: WaitClock = realClock) {}

  /** Objects waited for right now. */
  get size(): number {
    return this.waiting.size;
  }

  /** Resolves once `held()` is true (checked now and at each delta of the object), or after `ms`. */
  wait(id: string, held: () => boolean, ms: number): Promise<void> {
    if (held() || ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const set = this.waiting.get(id) ?? new Set<Waiter>();
      this.waiting.set(id, set);
      const w: Waiter = {
        held,
        done: () => {
          this.clock.clearTimeout(timer);
          set.delete(w);
          if (!set.size && this.waiting.get(id) === set) this.waiting.delete(id);
          resolve();
        },
      };
      const timer = this.clock.setTimeout(() => w.done(), ms);
      set.add(w);
    });
  }

  /** A store applied a delta of the object `id`: wakes the waits it satisfies. */
  changed(id: string): void {
    for (const w of [...(this.waiting.get(id) ?? [])]) if (w.held()) w.done();
  }
}
