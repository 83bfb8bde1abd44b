/**
 * The watch relay: informer caches shared per (resource, selector), one work queue per
 * function with de-duplication, per-function concurrency, jittered backoff, typed-error
 * handling, and graceful shutdown. All state it needs is rebuilt from the API server on start.
 *
 * The caches hold only what the functions declare (their trigger and `also` kinds, narrowed by
 * label selectors; Secrets and ConfigMaps are never cached but read by name, see `fetch`), stored
 * without managedFields; kruntimes_relay_cached_objects reports their size per collection.
 */
import type { Logger } from 'pino';
import type { KubeClient } from '../lib/kube/client.ts';
import { isApiError } from '../lib/kube/errors.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { ListWatch } from '../lib/kube/watch.ts';
import { TerminalError, TransientError, WaitingError } from '../lib/fn/errors.ts';
import { executeOperations } from '../lib/fn/execute.ts';
import { fetchRefs, withFetched } from '../lib/fn/fetch.ts';
import type { FnMetrics } from '../lib/fn/metrics.ts';
import { WorkQueue } from '../lib/fn/queue.ts';
import { handlerState } from '../lib/fn/ignore.ts';
import {
  keyOf,
  resourcePath,
  type Resource,
  type State,
  type WatchFunction,
  type WatchTrigger,
} from '../lib/fn/types.ts';
import type { Transport } from './transport.ts';
import { RelayCache, rvAtLeast } from './relay-cache.ts';
import { HOLD_RECHECK_MS, WriteFences, type Seen } from './relay-writes.ts';

export { matchesLabels, newer, rvAtLeast } from './relay-cache.ts';

export interface RelayOptions {
  /** The relay's own client: list/watch of the declared kinds. */
  client: KubeClient;
  /** The client a function's operations and live reads go through (its own ServiceAccount); default `client`. */
  clientFor?: (fn: WatchFunction) => KubeClient;
  /** How a function is invoked; default in process. */
  transportFor?: (fn: WatchFunction) => Transport;
  log: Logger;
  metrics: FnMetrics;
  now?: () => Date;
}

const informerKey = (r: Resource, selector?: string): string => `${resourcePath(r)}?${selector ?? ''}`;

/** What the caches keep of an object: everything but managedFields (often half its size; no reader needs it). */
export function cachedCopy(o: KubeObject): KubeObject {
  if (!o.metadata.managedFields) return o;
  const { managedFields: _dropped, ...metadata } = o.metadata;
  return { ...o, metadata };
}

/** Equality-based label selector strings (k=v, k==v, k!=v, k, !k); undefined when not understood. */
export function selectorMatches(selector: string | undefined, labels: Record<string, string>): boolean | undefined {
  if (!selector) return true;
  for (const raw of selector.split(',')) {
    const term = raw.trim();
    let m: RegExpExecArray | null;
    if ((m = /^([\w./-]+)\s*!=\s*([\w.-]*)$/.exec(term))) {
      if (labels[m[1]!] === m[2]) return false;
    } else if ((m = /^([\w./-]+)\s*==?\s*([\w.-]*)$/.exec(term))) {
      if (labels[m[1]!] !== m[2]) return false;
    } else if ((m = /^!([\w./-]+)$/.exec(term))) {
      if (m[1]! in labels) return false;
    } else if ((m = /^([\w./-]+)$/.exec(term))) {
      if (!(m[1]! in labels)) return false;
    } else return undefined;
  }
  return true;
}

type RelayDelta = { type: 'added' | 'updated' | 'deleted'; object: KubeObject; old?: KubeObject };

/**
 * What an event of a trigger's primary kind queues: nothing when its filter drops it, else its
 * keys, at once or, when the trigger says the handler has nothing to do before a time
 * (`dueAt`), as a delayed add for then (a relist of many finished objects invokes nothing).
 * The deletion of an object keyed by itself first drops what the queue kept for its key (a
 * delayed add, a failure count): nothing of a deleted object stays behind in the relay.
 */
export function wake(
  t: WatchTrigger,
  d: RelayDelta,
  q: Pick<WorkQueue, 'add' | 'addAfter' | 'drop'>,
  nowMs: number,
): void {
  if (d.type === 'deleted' && !t.keys) q.drop(keyOf(d.object));
  if (t.filter && !t.filter(d)) return;
  const due = t.dueAt?.(d.object);
  for (const k of t.keys ? t.keys(d.object) : [keyOf(d.object)]) {
    if (due !== undefined && due > nowMs) q.addAfter(k, due - nowMs);
    else q.add(k);
  }
}

/** Queues the primary keys a change of a secondary kind (trigger.also) maps to, unless its filter drops it. */
export function wakeAlso(
  a: NonNullable<WatchTrigger['also']>[number],
  d: RelayDelta,
  q: Pick<WorkQueue, 'add'>,
  nowMs: number,
  state: State,
): void {
  if (a.filter && !a.filter(d, nowMs)) return;
  for (const k of a.map(d.object, state)) q.add(k);
}

export class Relay {
  private readonly informers = new Map<string, ListWatch<KubeObject>>();
  /** The informers' stores per collection, read as one state (newest copy; readBy indexes). */
  private readonly cache: RelayCache<ListWatch<KubeObject>>;
  private readonly queues = new Map<string, WorkQueue>();
  private readonly workers: Promise<void>[] = [];
  private readonly listeners = new Map<
    string,
    ((d: { type: 'added' | 'updated' | 'deleted'; object: KubeObject; old?: KubeObject }) => void)[]
  >();
  private readonly now: () => Date;
  private readonly clients = new Map<string, KubeClient>();
  private readonly transports = new Map<string, Transport | undefined>();
  private readonly fences = new WriteFences();

  constructor(
    private readonly functions: WatchFunction[],
    private readonly o: RelayOptions,
  ) {
    this.now = o.now ?? (() => new Date());
    this.cache = new RelayCache(functions);
    for (const fn of functions) {
      this.clients.set(fn.name, o.clientFor?.(fn) ?? o.client);
      const t = o.transportFor?.(fn);
      this.transports.set(fn.name, t?.name === 'inprocess' ? undefined : t);
    }
  }

  /** The informer caches as one state (see RelayCache). */
  get state(): State {
    return this.cache.state;
  }

  private informer(r: Resource, selector?: string): { key: string; inf: ListWatch<KubeObject> } {
    const key = informerKey(r, selector);
    let inf = this.informers.get(key);
    if (!inf) {
      inf = new ListWatch<KubeObject>(
        this.o.client,
        {
          path: resourcePath(r),
          ...(selector ? { labelSelector: selector } : {}),
          onError: (err) => this.o.log.warn({ err, resource: r.resource }, 'watch error'),
          transform: cachedCopy,
        },
        (d) => {
          this.cache.changed(r, d.object);
          if (d.type === 'deleted')
            this.fences.deleted(`${resourcePath(r)} ${keyOf(d.object)}`, d.object.metadata.resourceVersion);
          this.fences.changed();
          this.countCached(resourcePath(r));
          for (const l of this.listeners.get(key) ?? []) l(d);
        },
      );
      this.informers.set(key, inf);
      this.cache.add(r, inf);
    }
    return { key, inf };
  }

  private countCached(path: string): void {
    const n = this.cache.holders(path).reduce((sum, i) => sum + i.store.size, 0);
    this.o.metrics.cachedObjects.set({ resource: path }, n);
  }

  /** Objects cached per resource collection path (summed over the informers of that collection). */
  cacheSizes(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const path of this.cache.paths()) out[path] = this.cache.holders(path).reduce((n, i) => n + i.store.size, 0);
    return out;
  }

  private listen(
    key: string,
    fn: (d: { type: 'added' | 'updated' | 'deleted'; object: KubeObject; old?: KubeObject }) => void,
  ): void {
    this.listeners.set(key, [...(this.listeners.get(key) ?? []), fn]);
  }

  /** Starts informers, waits until all caches synced, then starts the workers. */
  async start(): Promise<void> {
    for (const fn of this.functions) {
      const q = new WorkQueue();
      this.queues.set(fn.name, q);
      const t = fn.trigger;
      const primary = this.informer(t.resource, t.labelSelector);
      this.listen(primary.key, (d) => {
        if (d.type === 'deleted' && !t.keys) this.fences.release(`${fn.name} ${keyOf(d.object)}`);
        wake(t, d, q, this.now().getTime());
      });
      for (const a of t.also ?? []) {
        const sec = this.informer(a.resource, a.labelSelector);
        this.listen(sec.key, (d) => wakeAlso(a, d, q, this.now().getTime(), this.state));
      }
    }
    for (const inf of this.informers.values()) inf.start();
    await Promise.all([...this.informers.values()].map((i) => i.synced));
    for (const path of this.cache.paths()) this.countCached(path);
    for (const g of this.functions.flatMap((f) => f.gauges ?? [])) this.o.metrics.stateGauge(g, () => this.state);
    for (const fn of this.functions) {
      for (let i = 0; i < (fn.concurrency ?? 4); i++) this.workers.push(this.work(fn, this.queues.get(fn.name)!));
    }
    this.o.log.info(
      { functions: this.functions.map((f) => f.name), informers: this.informers.size },
      'relay synced and running',
    );
  }

  private async work(fn: WatchFunction, q: WorkQueue): Promise<void> {
    for (;;) {
      const key = await q.get();
      if (key === undefined) return;
      this.o.metrics.queueDepth.set({ name: fn.name }, q.length);
      const end = this.o.metrics.reconcileTime.startTimer({ controller: fn.name });
      try {
        await this.reconcile(fn, q, key);
      } finally {
        end();
        q.done(key);
      }
    }
  }

  private async reconcile(fn: WatchFunction, q: WorkQueue, key: string): Promise<void> {
    const log = this.o.log.child({ controller: fn.name, key });
    if (this.held(fn, q, key, log)) return;
    const sep = key.indexOf('/');
    const object = this.state.get(
      fn.trigger.resource,
      sep < 0 ? undefined : key.slice(0, sep),
      sep < 0 ? key : key.slice(sep + 1),
    );
    try {
      const state = await this.stateFor(fn, key, object);
      const input = { key, object, state, now: this.now() };
      const remote = this.transports.get(fn.name);
      const ops = remote ? await remote.invoke(fn, input) : await fn.handler(input);
      const res = await executeOperations(this.clients.get(fn.name) ?? this.o.client, fn.name, ops);
      await this.seeWrites(fn, key, res.written);
      q.forget(key);
      if (res.requeueAfterMs !== undefined) q.addAfter(key, res.requeueAfterMs);
      this.o.metrics.reconcileTotal.inc({
        controller: fn.name,
        result: res.requeueAfterMs !== undefined ? 'requeue_after' : 'success',
      });
    } catch (err) {
      this.onError(fn, q, key, err, log);
    }
  }

  /** The cached state, plus this invocation's live reads when the function declares them, without
   * what the function ignores. */
  private async stateFor(fn: WatchFunction, key: string, object: KubeObject | undefined): Promise<State> {
    return handlerState(fn, await this.liveState(fn, key, object), key);
  }

  private async liveState(fn: WatchFunction, key: string, object: KubeObject | undefined): Promise<State> {
    const f = fn.trigger.fetch;
    if (!f) return this.state;
    const client = this.clients.get(fn.name) ?? this.o.client;
    const get = (path: string): Promise<KubeObject | undefined> =>
      client.get<KubeObject>(path).catch((err: unknown) => {
        if (isApiError(err, 404)) return undefined;
        throw err;
      });
    return withFetched(
      this.state,
      f.resources,
      await fetchRefs(get, f.refs({ key, object, state: handlerState(fn, this.state, key) })),
    );
  }

  private onError(fn: WatchFunction, q: WorkQueue, key: string, err: unknown, log: Logger): void {
    const m = this.o.metrics;
    if (err instanceof WaitingError) {
      q.addAfter(key, err.retryAfterMs);
      m.reconcileTotal.inc({ controller: fn.name, result: 'requeue_after' });
      return;
    }
    if (err instanceof TerminalError || isApiError(err, 422)) {
      q.forget(key);
      m.terminalErrors.inc({ controller: fn.name });
      m.reconcileTotal.inc({ controller: fn.name, result: 'error' });
      log.error({ err }, 'terminal error; not retried');
      return;
    }
    m.reconcileErrors.inc({ controller: fn.name });
    m.reconcileTotal.inc({ controller: fn.name, result: isApiError(err, 409) ? 'requeue' : 'error' });
    if (isApiError(err, 409)) {
      q.add(key);
      return;
    }
    const delay = q.addRateLimited(key);
    const level = err instanceof TransientError || (isApiError(err) && err.transient) ? 'warn' : 'error';
    log[level]({ err, retryInMs: delay }, 'reconcile failed; retrying');
  }

  /**
   * A key whose last invocation's writes the caches still do not show is not invoked: it looks
   * again shortly (relay-writes.ts). True when the key is held.
   */
  private held(fn: WatchFunction, q: WorkQueue, key: string, log: Logger): boolean {
    const h = this.fences.holding(`${fn.name} ${key}`);
    if (h.expired) log.warn('writes of the last invocation still not in the cache; invoking on the cache as it is');
    if (!h.wait) return false;
    q.addAfter(key, HOLD_RECHECK_MS);
    this.o.metrics.reconcileTotal.inc({ controller: fn.name, result: 'held' });
    return true;
  }

  /** Read-your-writes: before the key is released, wait (bounded, woken by cache changes) until
   * the caches hold what this invocation wrote; if they do not by then, the key is held. */
  private async seeWrites(
    fn: WatchFunction,
    key: string,
    written: { resource: Resource; object: KubeObject }[],
  ): Promise<void> {
    if (!written.length) return;
    const seen = this.seenAll(written);
    if (!(await this.fences.wait(seen))) this.fences.hold(`${fn.name} ${key}`, seen);
  }

  /** True once, for every write, some informer that would hold the object holds it at least as new
   * (or saw it deleted since). */
  private seenAll(written: { resource: Resource; object: KubeObject }[]): Seen {
    const checks = written.flatMap((w) => {
      const infs = this.cache
        .holders(resourcePath(w.resource))
        .filter((i) => selectorMatches(i.labelSelector, w.object.metadata.labels ?? {}) !== false);
      if (!infs.length) return [];
      const key = keyOf(w.object);
      const rv = w.object.metadata.resourceVersion ?? '';
      const gone = `${resourcePath(w.resource)} ${key}`;
      // Seen once an informer holds it at least as new, or its deletion since then was seen.
      return [
        () =>
          infs.some((i) => rvAtLeast(i.store.get(key)?.metadata.resourceVersion, rv)) ||
          rvAtLeast(this.fences.deletedAt(gone), rv),
      ];
    });
    return () => checks.every((c) => c());
  }

  /** Stops the watches, lets in-flight reconciles finish, and ends the workers. */
  async stop(): Promise<void> {
    for (const inf of this.informers.values()) inf.stop();
    for (const q of this.queues.values()) q.shutDown();
    await Promise.all(this.workers);
  }

  queueDepth(name: string): number {
    return this.queues.get(name)?.length ?? 0;
  }
}
