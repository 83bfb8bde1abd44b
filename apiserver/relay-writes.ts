/**
 * Read-your-writes for the relay. After an invocation's operations, its key is released only
 * once the caches show what it wrote, so the key's next invocation never decides on older state
 * (a just-created batch Job "missing", a status it already wrote). The wait is woken by cache
 * changes, never by spinning. When the caches are still behind after the wait (a watch broken by
 * a kube-apiserver restart), the key is held: it is not invoked again until they catch up, or
 * until the hold expires and the cache is all there is to decide on.
 */
import type { Clock } from '../lib/fn/queue.ts';
import { realClock } from '../lib/fn/queue.ts';

/** How long an invocation waits for its writes before the key is released to be held. */
export const SEE_WRITES_MS = 2_000;
/** How long a held key waits for its writes at most before it is invoked on the cache as it is. */
export const HOLD_MS = 60_000;
/** How often a held key looks again. */
export const HOLD_RECHECK_MS = 250;

/** True when the caches show every write of an invocation. */
export type Seen = () => boolean;

/** How many recent deletions are remembered (a write whose object was deleted since is seen). */
export const TOMBSTONES = 4096;

export class WriteFences {
  private readonly waiters = new Set<() => void>();
  private readonly held = new Map<string, { seen: Seen; until: number }>();
  /** Recent deletions: "<collection> <key>" → the deleted object's last resourceVersion. */
  private readonly tombstones = new Map<string, string>();

  constructor(private readonly clock: Clock = realClock) {}

  /** Call on every cache change: wakes the waits whose writes may have arrived. */
  changed(): void {
    for (const w of this.waiters) w();
  }

  /** Call on a deletion the caches saw: a write to that object is then seen (it will not appear). */
  deleted(id: string, rv: string | undefined): void {
    if (!rv) return;
    this.tombstones.delete(id);
    this.tombstones.set(id, rv);
    if (this.tombstones.size > TOMBSTONES) this.tombstones.delete(this.tombstones.keys().next().value!);
  }

  /** The resourceVersion the object was deleted at, when its deletion was seen recently. */
  deletedAt(id: string): string | undefined {
    return this.tombstones.get(id);
  }

  /** Resolves true as soon as `seen` holds (checked at once and on each change), false after ms. */
  wait(seen: Seen, ms: number = SEE_WRITES_MS): Promise<boolean> {
    if (seen()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const end = (ok: boolean): void => {
        this.waiters.delete(check);
        this.clock.clearTimeout(timer);
        resolve(ok);
      };
      const check = (): void => {
        if (seen()) end(true);
      };
      const timer = this.clock.setTimeout(() => end(false), ms);
      this.waiters.add(check);
    });
  }

  /** Holds a key whose writes the caches did not show in time. */
  hold(id: string, seen: Seen, ms: number = HOLD_MS): void {
    this.held.set(id, { seen, until: this.clock.now() + ms });
  }

  /**
   * Whether the key must wait before its next invocation: its writes are still not in the caches
   * and the hold has not expired. A hold that ends (seen or expired) is dropped; `expired` tells
   * the caller which.
   */
  holding(id: string): { wait: boolean; expired?: boolean } {
    const h = this.held.get(id);
    if (!h) return { wait: false };
    if (h.seen()) {
      this.held.delete(id);
      return { wait: false };
    }
    if (this.clock.now() >= h.until) {
      this.held.delete(id);
      return { wait: false, expired: true };
    }
    return { wait: true };
  }

  /** Forgets a key's hold (its object is gone). */
  release(id: string): void {
    this.held.delete(id);
  }

  /** Waits in progress and keys held (for tests and metrics). */
  get size(): { waiting: number; held: number } {
    return { waiting: this.waiters.size, held: this.held.size };
  }
}
