/**
 * A watched collection in the page (no DOM here): objects by namespace/name from a snapshot and
 * the deltas after it, handed to the view at most once per scheduled flush however many deltas
 * arrive meanwhile. Rendering per delta made a 1,000-Run namespace fall minutes behind its watch.
 */
export interface Keyed {
  metadata: { name: string; namespace?: string };
}

export class LiveStore<T extends Keyed> {
  private readonly items = new Map<string, T>();
  private pending = false;

  constructor(
    private readonly publish: (items: T[]) => void,
    /** Calls `flush` once, later (the page: the next animation frame, or a timer in a hidden tab). */
    private readonly schedule: (flush: () => void) => void,
  ) {}

  snapshot(items: T[]): void {
    this.items.clear();
    for (const o of items) this.items.set(LiveStore.key(o), o);
    this.request();
  }

  delta(type: string, o: T): void {
    if (type === 'deleted') this.items.delete(LiveStore.key(o));
    else this.items.set(LiveStore.key(o), o);
    this.request();
  }

  get size(): number {
    return this.items.size;
  }

  private request(): void {
    if (this.pending) return;
    this.pending = true;
    this.schedule(() => {
      this.pending = false;
      this.publish([...this.items.values()]);
    });
  }

  private static key(o: Keyed): string {
    return `${o.metadata.namespace ?? ''}/${o.metadata.name}`;
  }
}

/** The page's schedule: the next frame, or 250 ms when frames are paused (a background tab); whichever first. */
export function nextFrame(flush: () => void): void {
  let done = false;
  const once = (): void => {
    if (done) return;
    done = true;
    flush();
  };
  (globalThis as unknown as { requestAnimationFrame: (f: () => void) => number }).requestAnimationFrame(once);
  setTimeout(once, 250);
}
