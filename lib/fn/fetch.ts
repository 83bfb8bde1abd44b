/**
 * Live reads for watch functions (WatchTrigger.fetch): before a handler runs, the host GETs the
 * objects the function names for this invocation and overlays them on the cached state, so the
 * handler stays a pure function of `state` while the host never lists or watches those kinds
 * (RBAC `get` only; e.g. Secrets are not mirrored into the host's memory).
 */
import type { KubeObject } from '../kube/types.ts';
import { resourcePath, type ObjectRef, type Resource, type State } from './types.ts';

/** Fetched objects by API path; `undefined` records an object that does not exist (404). */
export type Fetched = Map<string, KubeObject | undefined>;

export const refPath = (r: ObjectRef): string =>
  resourcePath(r.resource, r.resource.namespaced ? r.namespace : undefined, r.name);

/** GETs each distinct ref once (in parallel); `get` resolves undefined for a missing object and rejects on other errors. */
export async function fetchRefs(
  get: (path: string) => Promise<KubeObject | undefined>,
  refs: ObjectRef[],
): Promise<Fetched> {
  const paths = [...new Set(refs.map(refPath))];
  const objects = await Promise.all(paths.map((p) => get(p)));
  return new Map(paths.map((p, i) => [p, objects[i]]));
}

/** `state` where the fetched kinds are answered only from `fetched` (other kinds from the cache). */
export function withFetched(state: State, kinds: Resource[], fetched: Fetched): State {
  const live = new Set(kinds.map((k) => resourcePath(k)));
  return {
    get: (r, ns, name) =>
      live.has(resourcePath(r))
        ? fetched.get(resourcePath(r, r.namespaced ? ns : undefined, name))
        : state.get(r, ns, name),
    list: (r, ns, sel) => {
      if (!live.has(resourcePath(r))) return state.list(r, ns, sel);
      const ofKind = [...fetched.entries()].filter(
        ([p, o]) =>
          o !== undefined &&
          p === refPath({ resource: r, namespace: o.metadata.namespace, name: o.metadata.name ?? '' }),
      );
      return ofKind
        .map(([, o]) => o!)
        .filter(
          (o) =>
            (!ns || o.metadata.namespace === ns) &&
            Object.entries(sel ?? {}).every(([k, v]) => o.metadata.labels?.[k] === v),
        );
    },
    // The host's indexes answer the cached kinds only (a fetched kind is never indexed).
    indexed: (r, by, value) => (live.has(resourcePath(r)) ? undefined : state.indexed?.(r, by, value)),
  };
}
