/**
 * The wire format of a watch function invoked out of process (transports `webhook` and
 * `lambda`): `functions.kruntimes.io/v1alpha1` FunctionInvocation, documented in
 * docs/functions.md. The relay sends the trigger, the key, the observed object, the observed
 * state the handler reads and `now`; the function answers its operations (a `requeue` is an
 * operation), a typed error, or the reads it still needs.
 *
 * Reads are answered by the relay from its caches (and, for `fetch` kinds, from this
 * invocation's GETs made as the function's ServiceAccount). The function side runs the handler
 * against exactly the reads it was sent; the reads it was not sent are returned as `needs`, the
 * relay answers them and invokes again (the handler is pure, so a re-run is safe). The relay remembers the reads of the function's last invocation as a template
 * for the next, so a steady stream of invocations needs one round each.
 */
import type { KubeObject } from '../kube/types.ts';
import { TerminalError, TransientError, WaitingError } from './errors.ts';
import { resourcePath, splitKey, type Operation, type Resource, type State, type WatchFunction } from './types.ts';

export const WIRE_API_VERSION = 'functions.kruntimes.io/v1alpha1';
export const WIRE_KIND = 'FunctionInvocation';
/** Reads the function may ask for in one invocation, over all rounds (a bound against a runaway handler). */
export const MAX_ROUNDS = 32;

/** One read of the observed state: a GET by name, or a list in a namespace (all when absent) narrowed by labels. */
export type ReadRef =
  | { resource: Resource; namespace?: string; name: string }
  | { resource: Resource; namespace?: string; labelSelector?: Record<string, string>; list: true };

/** A read with its answer: `object` (null when absent) for a GET, `items` for a list. */
export type ReadAnswer = ReadRef & { object?: KubeObject | null; items?: KubeObject[] };

export interface InvocationRequest {
  uid: string;
  function: string;
  trigger: { type: 'watch'; resource: Resource };
  key: string;
  /** The observed object of the key; null when it no longer exists. */
  object: KubeObject | null;
  /** RFC 3339 time of the invocation: the handler's `now`. */
  now: string;
  reads: ReadAnswer[];
}

export interface WireError {
  type: 'Terminal' | 'Waiting' | 'Transient' | 'Internal';
  reason?: string;
  message: string;
  retryAfterMs?: number;
}

export interface InvocationResponse {
  uid: string;
  operations?: Operation[];
  needs?: ReadRef[];
  error?: WireError;
}

export interface Envelope<T> {
  apiVersion: string;
  kind: string;
  request?: T extends InvocationRequest ? T : never;
  response?: T extends InvocationResponse ? T : never;
}

const sameSelector = (a: Record<string, string> | undefined, b: Record<string, string> | undefined): boolean => {
  const ea = Object.entries(a ?? {}).sort();
  const eb = Object.entries(b ?? {}).sort();
  return ea.length === eb.length && ea.every(([k, v], i) => eb[i]![0] === k && eb[i]![1] === v);
};

export const readId = (r: ReadRef): string =>
  'list' in r
    ? `list ${resourcePath(r.resource)} ${r.namespace ?? ''} ${JSON.stringify(Object.entries(r.labelSelector ?? {}).sort())}`
    : `get ${resourcePath(r.resource)} ${r.namespace ?? ''} ${r.name}`;

/** A read the function was not sent (function side; serveInvocation records it). */
export class MissingRead extends Error {
  constructor(readonly ref: ReadRef) {
    super(`read not supplied: ${readId(ref)}`);
    this.name = 'MissingRead';
  }
}

const labelsMatch = (o: KubeObject, sel: Record<string, string> | undefined): boolean =>
  Object.entries(sel ?? {}).every(([k, v]) => o.metadata.labels?.[k] === v);

/** Function side: a State answering only from the supplied reads (a whole-namespace list answers narrower reads). */
export function suppliedState(reads: ReadAnswer[]): State {
  const of = (r: Resource): ReadAnswer[] => reads.filter((a) => resourcePath(a.resource) === resourcePath(r));
  const covering = (r: Resource, ns: string | undefined): ReadAnswer | undefined =>
    of(r).find((a) => 'list' in a && !a.labelSelector && (a.namespace === undefined || a.namespace === ns));
  return {
    get: (r, ns, name) => {
      const hit = of(r).find((a) => !('list' in a) && a.name === name && (a.namespace ?? '') === (ns ?? ''));
      if (hit) return hit.object ?? undefined;
      const list = covering(r, ns);
      if (list) return list.items?.find((o) => o.metadata.name === name && (o.metadata.namespace ?? '') === (ns ?? ''));
      throw new MissingRead({ resource: r, ...(ns ? { namespace: ns } : {}), name });
    },
    list: (r, ns, sel) => {
      const hit = of(r).find((a) => 'list' in a && a.namespace === ns && sameSelector(a.labelSelector, sel));
      if (hit) return hit.items ?? [];
      const list = covering(r, ns);
      if (list) return (list.items ?? []).filter((o) => (!ns || o.metadata.namespace === ns) && labelsMatch(o, sel));
      throw new MissingRead({
        resource: r,
        ...(ns ? { namespace: ns } : {}),
        ...(sel ? { labelSelector: sel } : {}),
        list: true,
      });
    },
  };
}

export function encodeError(err: unknown): WireError {
  if (err instanceof WaitingError)
    return { type: 'Waiting', reason: err.reason, message: err.message, retryAfterMs: err.retryAfterMs };
  if (err instanceof TerminalError) return { type: 'Terminal', reason: err.reason, message: err.message };
  if (err instanceof TransientError)
    return {
      type: 'Transient',
      message: err.message,
      ...(err.retryAfterMs !== undefined ? { retryAfterMs: err.retryAfterMs } : {}),
    };
  return { type: 'Internal', message: err instanceof Error ? err.message : String(err) };
}

/** Relay side: the typed error the relay's retry policy understands. */
export function decodeError(fn: string, e: WireError): Error {
  switch (e.type) {
    case 'Waiting':
      return new WaitingError(e.reason ?? 'Waiting', e.message, e.retryAfterMs);
    case 'Terminal':
      return new TerminalError(e.reason ?? 'Terminal', e.message);
    case 'Transient':
      return new TransientError(e.message, e.retryAfterMs);
    default:
      return new Error(`function ${fn}: ${e.message}`);
  }
}

/**
 * Function side: one invocation of a watch function's handler on a wire request. A read that was
 * not sent is answered as absent (a GET) or empty (a list), exactly what a cache that has not yet
 * seen an object answers in process, and recorded; when any read was missing, the operations are
 * discarded and the response lists every missing read, so one round answers all reads of a level.
 */
export async function serveInvocation(fn: WatchFunction, req: InvocationRequest): Promise<InvocationResponse> {
  const state = suppliedState(req.reads);
  const missing = new Map<string, ReadRef>();
  const miss = <T>(read: () => T, absent: T): T => {
    try {
      return read();
    } catch (err) {
      if (!(err instanceof MissingRead)) throw err;
      missing.set(readId(err.ref), err.ref);
      return absent;
    }
  };
  const recording: State = {
    get: (r, ns, name) => miss(() => state.get(r, ns, name), undefined),
    list: (r, ns, sel) => miss(() => state.list(r, ns, sel), []),
  };
  const input = { key: req.key, object: req.object ?? undefined, state: recording, now: new Date(req.now) };
  try {
    const operations = await fn.handler(input);
    return missing.size ? { uid: req.uid, needs: [...missing.values()] } : { uid: req.uid, operations };
  } catch (err) {
    return missing.size ? { uid: req.uid, needs: [...missing.values()] } : { uid: req.uid, error: encodeError(err) };
  }
}

/** Relay side: answers reads from the relay's state. */
export function answerReads(state: State, refs: ReadRef[]): ReadAnswer[] {
  return refs.map((r) =>
    'list' in r
      ? { ...r, items: state.list(r.resource, r.namespace, r.labelSelector) }
      : { ...r, object: state.get(r.resource, r.namespace, r.name) ?? null },
  );
}

const NS = '\u0000ns';
const NAME = '\u0000name';

/** Relay side: a function's reads as a template of its key (namespace and name placeholders). */
export function templateOf(refs: ReadRef[], key: string): ReadRef[] {
  const k = splitKey(key);
  return refs.map((r) => {
    const t: ReadRef = { ...r };
    if (k.namespace !== undefined && r.namespace === k.namespace) t.namespace = NS;
    if (!('list' in t) && 'name' in r && r.name === k.name) t.name = NAME;
    return t;
  });
}

/** Relay side: the template filled for a key (reads of another namespace than the key's are kept as they were). */
export function fillTemplate(template: ReadRef[], key: string): ReadRef[] {
  const k = splitKey(key);
  const out: ReadRef[] = [];
  for (const t of template) {
    if (t.namespace === NS && k.namespace === undefined) continue;
    const r: ReadRef = { ...t };
    if (t.namespace === NS) r.namespace = k.namespace;
    if (!('list' in r) && r.name === NAME) r.name = k.name;
    out.push(r);
  }
  return out;
}
