/** The CronJob host: run one function once against a fresh snapshot of what it reads, then exit. */
import type { KubeClient } from '../kube/client.ts';
import { isApiError } from '../kube/errors.ts';
import type { KubeObject } from '../kube/types.ts';
import { TerminalError, WaitingError } from './errors.ts';
import { executeOperations } from './execute.ts';
import { keyOf, resourcePath, type CronFunction, type Read, type State } from './types.ts';

/** Exit codes: 0 done, 1 terminal error (a change of input is needed), 75 temporary failure (retry). */
export const EXIT_OK = 0;
export const EXIT_TERMINAL = 1;
export const EXIT_TEMPFAIL = 75;

/** One read: a GET by name (absent on 404) or a paged list. */
async function readObjects(client: KubeClient, read: Read): Promise<KubeObject[]> {
  const { resource: r, namespace, labelSelector, name } = read;
  if (name !== undefined) {
    const o = await client.get<KubeObject>(resourcePath(r, namespace, name)).catch((err: unknown) => {
      if (isApiError(err, 404)) return undefined;
      throw err;
    });
    return o ? [o] : [];
  }
  const out: KubeObject[] = [];
  let cont: string | undefined;
  do {
    const page = await client.list(resourcePath(r, namespace), { limit: 500, continue: cont, labelSelector });
    out.push(...page.items);
    cont = page.metadata.continue || undefined;
  } while (cont);
  return out;
}

export async function snapshotState(client: KubeClient, reads: Read[]): Promise<State> {
  const data = new Map<string, Map<string, KubeObject>>();
  for (const read of reads) {
    const items = data.get(resourcePath(read.resource)) ?? new Map<string, KubeObject>();
    for (const o of await readObjects(client, read)) items.set(keyOf(o), o);
    data.set(resourcePath(read.resource), items);
  }
  return {
    get: (r, ns, name) => data.get(resourcePath(r))?.get(ns ? `${ns}/${name}` : name),
    list: (r, ns, sel) =>
      [...(data.get(resourcePath(r))?.values() ?? [])].filter(
        (o) =>
          (!ns || o.metadata.namespace === ns) &&
          Object.entries(sel ?? {}).every(([k, v]) => o.metadata.labels?.[k] === v),
      ),
  };
}

export async function runCron(
  fn: CronFunction,
  client: KubeClient,
  now: () => Date = () => new Date(),
): Promise<{ code: number; message: string }> {
  try {
    const state = await snapshotState(client, fn.trigger.reads);
    const ops = await fn.handler({ state, now: now() });
    await executeOperations(client, fn.name, ops);
    return { code: EXIT_OK, message: `${fn.name}: ${ops.length} operation(s) applied` };
  } catch (err) {
    const msg = err instanceof Error ? err.message : String(err);
    if (err instanceof TerminalError || isApiError(err, 422) || isApiError(err, 403))
      return { code: EXIT_TERMINAL, message: `${fn.name}: ${msg}` };
    if (err instanceof WaitingError) return { code: EXIT_TEMPFAIL, message: `${fn.name}: waiting: ${msg}` };
    return { code: EXIT_TEMPFAIL, message: `${fn.name}: temporary failure: ${msg}` };
  }
}
