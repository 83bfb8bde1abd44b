/**
 * The pure core of list+watch: a store keyed by namespace/name that turns watch events and
 * relists into deltas. Kept free of I/O so any interleaving can be property-tested.
 */
import type { KubeObject, WatchEvent } from './types.ts';

export type DeltaType = 'added' | 'updated' | 'deleted';
export interface Delta<T extends KubeObject> {
  type: DeltaType;
  object: T;
  old?: T;
}

export function objectKey(o: KubeObject): string {
  const { namespace, name } = o.metadata;
  return namespace ? `${namespace}/${name ?? ''}` : (name ?? '');
}

function rvOf(o: KubeObject): string {
  return o.metadata.resourceVersion ?? '';
}

export class Store<T extends KubeObject> {
  private readonly items = new Map<string, T>();

  get(key: string): T | undefined {
    return this.items.get(key);
  }
  list(): T[] {
    return [...this.items.values()];
  }
  keys(): string[] {
    return [...this.items.keys()];
  }
  get size(): number {
    return this.items.size;
  }

  /** Applies one watch event; returns the delta it caused, if any. */
  apply(ev: WatchEvent<T>): Delta<T> | undefined {
    if (ev.type === 'BOOKMARK' || ev.type === 'ERROR') return undefined;
    const key = objectKey(ev.object);
    const old = this.items.get(key);
    if (ev.type === 'DELETED') {
      if (!old) return undefined;
      this.items.delete(key);
      return { type: 'deleted', object: ev.object, old };
    }
    this.items.set(key, ev.object);
    if (!old) return { type: 'added', object: ev.object };
    if (rvOf(old) === rvOf(ev.object)) return undefined;
    return { type: 'updated', object: ev.object, old };
  }

  /** Replaces the whole content with a fresh list; returns the deltas versus what was known. */
  replace(items: T[]): Delta<T>[] {
    const deltas: Delta<T>[] = [];
    const seen = new Set<string>();
    for (const item of items) {
      const key = objectKey(item);
      seen.add(key);
      const old = this.items.get(key);
      this.items.set(key, item);
      if (!old) deltas.push({ type: 'added', object: item });
      else if (rvOf(old) !== rvOf(item)) deltas.push({ type: 'updated', object: item, old });
    }
    for (const [key, old] of this.items) {
      if (!seen.has(key)) {
        this.items.delete(key);
        deltas.push({ type: 'deleted', object: old, old });
      }
    }
    return deltas;
  }
}
