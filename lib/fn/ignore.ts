/**
 * The state a watch handler is given, without the objects its trigger declares it never needs
 * (WatchTrigger.ignore). The relay applies it to every invocation whatever the transport, so the
 * handler sees the same state in process and out of process, and a FunctionInvocation's reads
 * (answered from this state) never carry those objects: e.g. a namespace's finished Runs, which
 * would otherwise make every scheduler invocation over the wire grow with the namespace's history.
 */
import { resourcePath, type IgnoreDecl, type State, type WatchFunction } from './types.ts';

export function withoutIgnored(state: State, ignore: IgnoreDecl[], key: string): State {
  const by = new Map<string, IgnoreDecl['when'][]>();
  for (const i of ignore) by.set(resourcePath(i.resource), [...(by.get(resourcePath(i.resource)) ?? []), i.when]);
  const ignored = (path: string, o: Parameters<IgnoreDecl['when']>[0]): boolean =>
    (by.get(path) ?? []).some((when) => when(o, key));
  return {
    get: (r, ns, name) => {
      const o = state.get(r, ns, name);
      return o && ignored(resourcePath(r), o) ? undefined : o;
    },
    list: (r, ns, sel) => {
      const all = state.list(r, ns, sel);
      return by.has(resourcePath(r)) ? all.filter((o) => !ignored(resourcePath(r), o)) : all;
    },
  };
}

/** The state a watch function's handler reads for `key`: `base` without what its trigger ignores. */
export function handlerState(fn: WatchFunction, base: State, key: string): State {
  const ignore = fn.trigger.ignore;
  return ignore?.length ? withoutIgnored(base, ignore, key) : base;
}
