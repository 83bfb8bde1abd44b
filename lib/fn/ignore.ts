/**
 * The state a watch handler is given, without the objects its trigger declares it never needs
 * (WatchTrigger.ignore). The relay applies it to every invocation whatever the transport, so the
 * handler sees the same state in process and out of process, and a FunctionInvocation's reads
 * (answered from this state) never carry those objects: e.g. a namespace's finished Runs, which
 * would otherwise make every scheduler invocation over the wire grow with the namespace's history.
 * When a declaration says which keys may read an object (`readBy`) and the host indexes by it, a
 * list visits only the key's candidates, so its cost does not grow with the ignored objects either.
 */
import type { KubeObject } from '../kube/types.ts';
import { resourcePath, type IgnoreDecl, type Resource, type State, type WatchFunction } from './types.ts';

const labelsMatch = (o: KubeObject, sel: Record<string, string> | undefined): boolean =>
  !sel || Object.entries(sel).every(([k, v]) => o.metadata.labels?.[k] === v);

/** What the key may read of `r` by one declaration, from the host's index when the declaration has
 * `readBy` and the host indexes it (then that declaration needs no further check), else undefined. */
function fromIndex(
  state: State,
  r: Resource,
  decls: IgnoreDecl[],
  key: string,
): { objects: KubeObject[]; by: IgnoreDecl } | undefined {
  if (!state.indexed) return undefined;
  for (const d of decls) {
    const objects = d.readBy ? state.indexed(r, d.readBy, key) : undefined;
    if (objects) return { objects, by: d };
  }
  return undefined;
}

export function withoutIgnored(state: State, ignore: IgnoreDecl[], key: string): State {
  const by = new Map<string, IgnoreDecl[]>();
  // A list answered from an index skips the check of the declaration it used: readBy is exact.
  for (const i of ignore) by.set(resourcePath(i.resource), [...(by.get(resourcePath(i.resource)) ?? []), i]);
  const ignored = (path: string, o: KubeObject): boolean => (by.get(path) ?? []).some((d) => d.when(o, key));
  return {
    get: (r, ns, name) => {
      const o = state.get(r, ns, name);
      return o && ignored(resourcePath(r), o) ? undefined : o;
    },
    list: (r, ns, sel) => {
      const decls = by.get(resourcePath(r));
      if (!decls) return state.list(r, ns, sel);
      const hit = fromIndex(state, r, decls, key);
      if (!hit) return state.list(r, ns, sel).filter((o) => !decls.some((d) => d.when(o, key)));
      const rest = decls.filter((d) => d !== hit.by);
      return hit.objects.filter(
        (o) => (!ns || o.metadata.namespace === ns) && labelsMatch(o, sel) && !rest.some((d) => d.when(o, key)),
      );
    },
  };
}

/** The state a watch function's handler reads for `key`: `base` without what its trigger ignores. */
export function handlerState(fn: WatchFunction, base: State, key: string): State {
  const ignore = fn.trigger.ignore;
  return ignore?.length ? withoutIgnored(base, ignore, key) : base;
}
