/**
 * list+watch done correctly: paged list, watch from the list's resourceVersion with
 * bookmarks, resume from the last seen resourceVersion, 410 Gone -> relist, an inactivity
 * watchdog for silent streams, and jittered exponential backoff on errors.
 */
import type { KubeClient, Query } from './client.ts';
import { ApiError, isApiError, type StatusBody } from './errors.ts';
import { Store, type Delta } from './cache.ts';
import type { KubeObject, WatchEvent } from './types.ts';

export interface ListWatchOptions<T extends KubeObject = KubeObject> {
  /** Collection path, e.g. /api/v1/pods or /apis/kruntimes.io/v1alpha1/namespaces/ns/runs. */
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Restart a watch that delivered nothing (not even a bookmark) for this long. */
  inactivityMs?: number;
  /** Server-side watch timeout. */
  timeoutSeconds?: number;
  pageSize?: number;
  onError?: (err: unknown) => void;
  /** Applied to every object before it is stored (e.g. drop fields no reader needs, to bound memory). */
  transform?: (o: T) => T;
  /** Waits out a retry backoff (injected by tests). */
  sleep?: (ms: number) => Promise<void>;
}

export const WATCH_BACKOFF_MAX_MS = 5_000;

export type DeltaHandler<T extends KubeObject> = (delta: Delta<T>) => void;

/**
 * The wait before a list or watch is tried again after `attempt` failures in a row: doubling from
 * baseMs, jittered within [half, full], capped at maxMs. The cap is 5 s, not client-go's 30 s: a
 * failing attempt against an API server that is down costs it nothing, and with a 30 s cap a
 * watch that lost a restarting API server came back up to 30 s after it (the soak's kube-apiserver
 * kill recoveries, p50 54 s, issue 18).
 */
export function backoffMs(attempt: number, baseMs = 200, maxMs = WATCH_BACKOFF_MAX_MS, rand = Math.random): number {
  const exp = Math.min(maxMs, baseMs * 2 ** Math.min(attempt, 20));
  return Math.round(exp / 2 + (exp / 2) * rand());
}

export class ListWatch<T extends KubeObject> {
  readonly store = new Store<T>();
  private resourceVersion = '';
  /** Failures since data last flowed (a relist, or an event on the watch): the backoff's attempt. */
  private failures = 0;
  private abort: AbortController | undefined;
  private stopped = false;
  private syncedResolve: (() => void) | undefined;
  readonly synced: Promise<void>;

  constructor(
    private readonly client: KubeClient,
    private readonly opts: ListWatchOptions<T>,
    private readonly onDelta: DeltaHandler<T>,
  ) {
    this.synced = new Promise((r) => {
      this.syncedResolve = r;
    });
  }

  get labelSelector(): string | undefined {
    return this.opts.labelSelector;
  }

  start(): void {
    void this.loop();
  }

  stop(): void {
    this.stopped = true;
    this.abort?.abort();
  }

  private selectors(): Query {
    return { labelSelector: this.opts.labelSelector, fieldSelector: this.opts.fieldSelector };
  }

  private async relist(): Promise<void> {
    const items: T[] = [];
    let cont: string | undefined;
    let rv = '';
    do {
      const page = await this.client.list<T>(this.opts.path, {
        ...this.selectors(),
        limit: this.opts.pageSize ?? 500,
        continue: cont,
      });
      items.push(...(this.opts.transform ? page.items.map(this.opts.transform) : page.items));
      cont = page.metadata.continue || undefined;
      rv = page.metadata.resourceVersion ?? '';
    } while (cont);
    this.resourceVersion = rv;
    this.failures = 0;
    for (const d of this.store.replace(items)) this.onDelta(d);
    this.syncedResolve?.();
  }

  private async loop(): Promise<void> {
    let needList = true;
    while (!this.stopped) {
      try {
        if (needList) await this.relist();
        needList = false;
        await this.watchOnce();
        this.failures = 0;
      } catch (err) {
        if (this.stopped) return;
        if (isApiError(err, 410)) {
          needList = true;
          continue;
        }
        this.opts.onError?.(err);
        await (this.opts.sleep ?? sleep)(backoffMs(this.failures++));
      }
    }
  }

  /** One watch connection; returns when the server closes it, throws on errors. */
  private async watchOnce(): Promise<void> {
    this.abort = new AbortController();
    const query: Query = {
      ...this.selectors(),
      watch: 1,
      allowWatchBookmarks: true,
      resourceVersion: this.resourceVersion,
      timeoutSeconds: this.opts.timeoutSeconds ?? 300,
    };
    const res = await this.client.stream(this.opts.path, { query, signal: this.abort.signal });
    const inactivity = this.opts.inactivityMs ?? 120_000;
    let timer = setTimeout(() => this.abort?.abort(), inactivity);
    let buf = '';
    try {
      for await (const chunk of res as AsyncIterable<Buffer>) {
        clearTimeout(timer);
        timer = setTimeout(() => this.abort?.abort(), inactivity);
        buf += chunk.toString('utf8');
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (!line.trim()) continue;
          this.handleLine(line);
          // Data flows again: the next failure backs off from the start (an API server killed
          // again and again must not push every reconnect further out).
          this.failures = 0;
        }
      }
    } catch (err) {
      if (!this.abort.signal.aborted || this.stopped) throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  private handleLine(line: string): void {
    const ev = JSON.parse(line) as WatchEvent<T>;
    if (ev.type === 'ERROR') {
      const st = ev.object as unknown as StatusBody;
      if (st.code === 410) this.resourceVersion = '';
      throw new ApiError(st.code ?? 500, st, 'watch error');
    }
    const rv = ev.object.metadata.resourceVersion;
    if (rv) this.resourceVersion = rv;
    if (this.opts.transform && ev.type !== 'BOOKMARK') ev.object = this.opts.transform(ev.object);
    const d = this.store.apply(ev);
    if (d) this.onDelta(d);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
