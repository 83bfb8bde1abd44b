/**
 * A work queue with client-go semantics: a key is queued at most once, never processed by two
 * workers at once (a key added while processing is re-queued when done), per-key jittered
 * exponential backoff for failures, and delayed adds. Time and timers are injectable.
 */
export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(t: unknown): void;
}
export const realClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (t) => clearTimeout(t as NodeJS.Timeout),
};

/** The longest delay a Node timer keeps (2^31 - 1 ms, about 24.8 days). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly delayed = new Map<string, { at: number; timer: unknown }>();
  private waiters: ((key: string | undefined) => void)[] = [];
  private shuttingDown = false;

  constructor(
    private readonly clock: Clock = realClock,
    private readonly baseMs = 50,
    private readonly maxMs = 60_000,
    private readonly rand: () => number = Math.random,
  ) {}

  get length(): number {
    return this.queue.length;
  }
  get inFlight(): number {
    return this.processing.size;
  }

  add(key: string): void {
    if (this.shuttingDown || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return;
    const w = this.waiters.shift();
    if (w) {
      this.dirty.delete(key);
      this.processing.add(key);
      w(key);
      return;
    }
    this.queue.push(key);
  }

  /** Adds the key after ms; an earlier pending delayed add wins. */
  addAfter(key: string, ms: number): void {
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const at = this.clock.now() + ms;
    const prev = this.delayed.get(key);
    if (prev && prev.at <= at) return;
    if (prev) this.clock.clearTimeout(prev.timer);
    // Node fires a timer longer than MAX_TIMER_MS after 1 ms: a long delay (a TTL of weeks) waits
    // in steps instead, or every pass would requeue it at once.
    const timer = this.clock.setTimeout(
      () => {
        this.delayed.delete(key);
        const left = at - this.clock.now();
        if (left > 0) this.addAfter(key, left);
        else this.add(key);
      },
      Math.min(ms, MAX_TIMER_MS),
    );
    this.delayed.set(key, { at, timer });
  }

  /** Requeues with backoff after a failure; returns the delay used. */
  addRateLimited(key: string): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    const exp = Math.min(this.maxMs, this.baseMs * 2 ** Math.min(n, 20));
    const delay = Math.round(exp / 2 + (exp / 2) * this.rand());
    this.addAfter(key, delay);
    return delay;
  }

  forget(key: string): void {
    this.failures.delete(key);
  }

  /**
   * Drops what the queue keeps for a key whose object is gone: its pending delayed add (a TTL
   * due in days would otherwise hold a timer per deleted object until then) and its failure count.
   */
  drop(key: string): void {
    const d = this.delayed.get(key);
    if (d) this.clock.clearTimeout(d.timer);
    this.delayed.delete(key);
    this.failures.delete(key);
  }

  /** Keys waiting for a delayed add. */
  get delayedCount(): number {
    return this.delayed.size;
  }

  /** Resolves with the next key (marked processing), or undefined after shutdown. */
  get(): Promise<string | undefined> {
    const key = this.queue.shift();
    if (key !== undefined) {
      this.dirty.delete(key);
      this.processing.add(key);
      return Promise.resolve(key);
    }
    if (this.shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.has(key)) {
      this.dirty.delete(key);
      this.add(key);
    }
  }

  shutDown(): void {
    this.shuttingDown = true;
    for (const d of this.delayed.values()) this.clock.clearTimeout(d.timer);
    this.delayed.clear();
    for (const w of this.waiters) w(undefined);
    this.waiters = [];
  }
}
