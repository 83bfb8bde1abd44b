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

/** The key's candidates of `r` from the host's index when a declaration has `readBy` and the host
 * indexes it (a superset of what the key may read), else undefined. */
function candidates(state: State, r: Resource, decls: IgnoreDecl[], key: string): KubeObject[] | undefined {
  if (!state.indexed) return undefined;
  for (const d of decls) {
    const hit = d.readBy ? state.indexed(r, d.readBy, key) : undefined;
    if (hit) return hit;
  }
  return undefined;
}

export function withoutIgnored(state: State, ignore: IgnoreDecl[], key: string): State {
  const by = new Map<string, IgnoreDecl[]>();
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
      const some = candidates(state, r, decls, key);
      const all = some
        ? some.filter((o) => (!ns || o.metadata.namespace === ns) && labelsMatch(o, sel))
        : state.list(r, ns, sel);
      return all.filter((o) => !ignored(resourcePath(r), o));
    },
  };
}

/** The state a watch function's handler reads for `key`: `base` without what its trigger ignores. */
export function handlerState(fn: WatchFunction, base: State, key: string): State {
  const ignore = fn.trigger.ignore;
  return ignore?.length ? withoutIgnored(base, ignore, key) : base;
}
