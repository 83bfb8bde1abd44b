/**
 * The watch relay's read side over its informer stores, free of I/O: the newest copy of an object
 * over the informers of its kind, and indexes by the keys a function's `WatchTrigger.ignore`
 * declares it may read (`IgnoreDecl.readBy`). With an index, a handler's list visits only the
 * objects its key may read (e.g. the pending and active Runs of one Runtime) instead of every
 * cached object of the kind, so an invocation's cost stops growing with the namespace's finished
 * Runs (issue 17). A list with a label selector in one namespace is answered from an index by
 * that label (built on the first such list, then kept current), not by scanning every cached
 * object of the kind: a WorkflowRun's step Runs are found among 10,000 retained task Runs without
 * looking at them. The relay reports every delta of a store (`changed`) after applying it.
 */
import type { Store } from '../lib/kube/cache.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { keyOf, resourcePath, type Resource, type State, type WatchFunction } from '../lib/fn/types.ts';

/** resourceVersions are etcd revisions in practice; compare numerically when both are numbers. */
export function rvAtLeast(have: string | undefined, want: string): boolean {
  if (have === undefined) return false;
  if (/^\d+$/.test(have) && /^\d+$/.test(want)) return BigInt(have) >= BigInt(want);
  return have === want;
}

/** Whether a is a newer version of the same object than b (resourceVersion order). */
export function newer(a: KubeObject, b: KubeObject): boolean {
  const ra = a.metadata.resourceVersion ?? '';
  const rb = b.metadata.resourceVersion ?? '';
  return ra !== rb && rvAtLeast(ra, rb);
}

export function matchesLabels(o: KubeObject, sel: Record<string, string> | undefined): boolean {
  if (!sel) return true;
  return Object.entries(sel).every(([k, v]) => o.metadata.labels?.[k] === v);
}

export type IndexFn = (o: KubeObject) => string[];

/** Object keys (namespace/name) by the values an index function gives their current version. */
export class KeyIndex {
  private readonly byValue = new Map<string, Set<string>>();
  private readonly valuesOf = new Map<string, string[]>();
  constructor(readonly by: IndexFn) {}

  /** Re-indexes one object key from its current version (undefined: gone from every store). */
  update(key: string, current: KubeObject | undefined): void {
    const next = current ? [...new Set(this.by(current))] : [];
    const prev = this.valuesOf.get(key) ?? [];
    for (const v of prev) {
      if (next.includes(v)) continue;
      const keys = this.byValue.get(v);
      keys?.delete(key);
      if (keys?.size === 0) this.byValue.delete(v);
    }
    for (const v of next) {
      if (prev.includes(v)) continue;
      let keys = this.byValue.get(v);
      if (!keys) this.byValue.set(v, (keys = new Set()));
      keys.add(key);
    }
    if (next.length) this.valuesOf.set(key, next);
    else this.valuesOf.delete(key);
  }

  keys(value: string): string[] {
    return [...(this.byValue.get(value) ?? [])];
  }
}

/** The index functions the relay keeps for these functions: per collection path, each `readBy` once. */
export function declaredIndexes(functions: WatchFunction[]): Map<string, KeyIndex[]> {
  const out = new Map<string, KeyIndex[]>();
  for (const fn of functions)
    for (const d of fn.trigger.ignore ?? []) {
      if (!d.readBy) continue;
      const path = resourcePath(d.resource);
      const list = out.get(path) ?? [];
      if (!list.some((i) => i.by === d.readBy)) list.push(new KeyIndex(d.readBy));
      out.set(path, list);
    }
  return out;
}

/** Something that holds a store of one kind (an informer). */
export interface Holder {
  readonly store: Store<KubeObject>;
}

/** The values a label index keeps for an object: its namespace with its value of the label. */
const labelValue = (ns: string, v: string): string => `${ns}\n${v}`;
const byLabel =
  (label: string): IndexFn =>
  (o) => {
    const v = o.metadata.labels?.[label];
    return v === undefined ? [] : [labelValue(o.metadata.namespace ?? '', v)];
  };

export class RelayCache<H extends Holder = Holder> {
  private readonly byResource = new Map<string, H[]>();
  private readonly indexes: Map<string, KeyIndex[]>;
  /** Per collection path, per label key: object keys by namespace and label value (lazily built). */
  private readonly labelIndexes = new Map<string, Map<string, KeyIndex>>();

  constructor(functions: WatchFunction[] = []) {
    this.indexes = declaredIndexes(functions);
  }

  add(r: Resource, holder: H): void {
    const path = resourcePath(r);
    this.byResource.set(path, [...(this.byResource.get(path) ?? []), holder]);
    for (const idx of this.labelIndexes.get(path)?.values() ?? []) this.reindex(path, idx, holder.store.keys());
  }

  holders(path: string): H[] {
    return this.byResource.get(path) ?? [];
  }

  paths(): string[] {
    return [...this.byResource.keys()];
  }

  /** After a store of `r` applied a change of `o` (added, updated, deleted): its index entries follow. */
  changed(r: Resource, o: KubeObject): void {
    const path = resourcePath(r);
    const idx = [...(this.indexes.get(path) ?? []), ...(this.labelIndexes.get(path)?.values() ?? [])];
    if (!idx.length) return;
    const key = keyOf(o);
    const current = this.byKey(path, key);
    for (const i of idx) i.update(key, current);
  }

  private reindex(path: string, idx: KeyIndex, keys: Iterable<string>): void {
    for (const k of keys) idx.update(k, this.byKey(path, k));
  }

  /** The index of `path` by `label`, built from the stores the first time it is asked for. */
  private labelIndex(path: string, label: string): KeyIndex {
    let perLabel = this.labelIndexes.get(path);
    if (!perLabel) this.labelIndexes.set(path, (perLabel = new Map<string, KeyIndex>()));
    let idx = perLabel.get(label);
    if (!idx) {
      perLabel.set(label, (idx = new KeyIndex(byLabel(label))));
      for (const h of this.holders(path)) this.reindex(path, idx, h.store.keys());
    }
    return idx;
  }

  /** A namespaced list with a label selector: the index of its first label's candidates. */
  private listByLabel(path: string, ns: string, sel: Record<string, string>): KubeObject[] | undefined {
    const first = Object.entries(sel)[0];
    if (!first) return undefined;
    const keep = (o: KubeObject): boolean => o.metadata.namespace === ns && matchesLabels(o, sel);
    return this.labelIndex(path, first[0])
      .keys(labelValue(ns, first[1]))
      .flatMap((k) => {
        const o = this.byKey(path, k);
        return o && keep(o) ? [o] : [];
      });
  }

  private byKey(path: string, key: string): KubeObject | undefined {
    let best: KubeObject | undefined;
    for (const h of this.holders(path)) {
      const hit = h.store.get(key);
      if (hit && (!best || newer(hit, best))) best = hit;
    }
    return best;
  }

  readonly state: State = {
    // Several informers may cache the same kind (different selectors, separate watches): always
    // answer with the newest copy, so a reconcile woken by one informer never reads a staler one.
    get: (r, ns, name) => this.byKey(resourcePath(r), ns ? `${ns}/${name}` : name),
    list: (r, ns, sel) => {
      const indexed = ns && sel ? this.listByLabel(resourcePath(r), ns, sel) : undefined;
      if (indexed) return indexed;
      const hs = this.holders(resourcePath(r));
      const keep = (o: KubeObject): boolean => (!ns || o.metadata.namespace === ns) && matchesLabels(o, sel);
      if (hs.length === 1) return hs[0]!.store.list().filter(keep);
      // Keys of the copies that match, then each key's newest copy if it still matches (an older
      // copy that matches never stands in for a newer one that does not).
      const keys = new Set<string>();
      for (const h of hs) for (const o of h.store.list()) if (keep(o)) keys.add(keyOf(o));
      return [...keys].flatMap((k) => {
        const o = this.byKey(resourcePath(r), k);
        return o && keep(o) ? [o] : [];
      });
    },
    indexed: (r, by, value) => {
      const path = resourcePath(r);
      const idx = this.indexes.get(path)?.find((i) => i.by === by);
      if (!idx) return undefined;
      return idx.keys(value).flatMap((k) => {
        const o = this.byKey(path, k);
        return o ? [o] : [];
      });
    },
  };
}
