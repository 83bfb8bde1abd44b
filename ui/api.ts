/** The browser side of the dashboard API: reads, watch streams (EventSource), access checks and actions. */
import { useEffect, useState } from 'preact/hooks';
import { LiveStore, nextFrame } from './store.ts';

export interface Meta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  creationTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
export interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}
export interface Obj {
  metadata: Meta;
  spec?: Record<string, unknown>;
  status?: Record<string, unknown> & { conditions?: Condition[]; phase?: string };
  [k: string]: unknown;
}
export interface Refusal {
  code: number;
  reason: string;
  message: string;
}
export interface WatchState {
  items: Obj[];
  synced: boolean;
  error?: Refusal;
}

export const KRT = '/apis/kruntimes.io/v1alpha1';

/** A live collection: one snapshot, then watch deltas pushed by the server (no polling), rendered once per frame. */
export function useWatch(path: string | undefined, params: Record<string, string> = {}): WatchState {
  const [state, setState] = useState<WatchState>({ items: [], synced: false });
  const pkey = JSON.stringify(params);
  useEffect(() => {
    if (!path) return;
    setState({ items: [], synced: false });
    let live = true;
    const store = new LiveStore<Obj>((items) => live && setState({ items, synced: true }), nextFrame);
    const es = new EventSource(`/api/watch?${new URLSearchParams({ path, ...params }).toString()}`);
    es.addEventListener('snapshot', (e) => store.snapshot(JSON.parse((e as MessageEvent<string>).data) as Obj[]));
    es.addEventListener('delta', (e) => {
      const d = JSON.parse((e as MessageEvent<string>).data) as { type: string; object: Obj };
      store.delta(d.type, d.object);
    });
    es.addEventListener('refused', (e) => {
      es.close();
      live = false;
      setState({ items: [], synced: true, error: JSON.parse((e as MessageEvent<string>).data) as Refusal });
    });
    return () => {
      live = false;
      es.close();
    };
  }, [path, pkey]);
  return state;
}

async function answer<T>(res: Response): Promise<T> {
  const body = (await res.json()) as T | Refusal;
  if (!res.ok) throw Object.assign(new Error((body as Refusal).message), body);
  return body as T;
}

export async function getJSON<T>(url: string): Promise<T> {
  return answer<T>(await fetch(url, { credentials: 'same-origin' }));
}

/** An action: same-origin POST with the CSRF header the server requires. */
export async function post<T>(url: string, body: unknown = {}): Promise<T> {
  const res = await fetch(url, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', 'X-Krt-Csrf': '1' },
    body: JSON.stringify(body),
  });
  return answer<T>(res);
}

export interface AccessCheck {
  namespace: string;
  verb: string;
  /** The API group (kruntimes.io when absent). */
  group?: string;
  resource: string;
  subresource?: string;
  name?: string;
}

/** SelfSubjectAccessReviews for the checks: undefined while asking, then one boolean each. */
export function useAccess(checks: AccessCheck[]): boolean[] | undefined {
  const [allowed, setAllowed] = useState<boolean[] | undefined>(undefined);
  const k = JSON.stringify(checks);
  useEffect(() => {
    let live = true;
    post<boolean[]>('/api/access', { checks })
      .then((a) => live && setAllowed(a))
      .catch(() => live && setAllowed(checks.map(() => false)));
    return () => {
      live = false;
    };
  }, [k]);
  return allowed;
}

export interface LogLine {
  time: string;
  stream: string;
  message: string;
  cursor?: string;
}
export interface LogState {
  lines: LogLine[];
  state: 'connecting' | 'waiting' | 'live' | 'ended' | 'refused' | 'retrying';
  error?: Refusal;
}
const MAX_LINES = 5000;

/** A Run's log, followed live; the browser's reconnect resumes at the last cursor (Last-Event-ID). */
export function useLog(ns: string, run: string): LogState {
  const [st, setSt] = useState<LogState>({ lines: [], state: 'connecting' });
  useEffect(() => {
    let lines: LogLine[] = [];
    const es = new EventSource(`/api/logs/${ns}/${run}`);
    es.addEventListener('log', (e) => {
      lines = [...lines, JSON.parse((e as MessageEvent<string>).data) as LogLine].slice(-MAX_LINES);
      setSt({ lines, state: 'live' });
    });
    es.addEventListener('waiting', () => setSt({ lines, state: 'waiting' }));
    es.addEventListener('problem', (e) => {
      setSt({ lines, state: 'retrying', error: JSON.parse((e as MessageEvent<string>).data) as Refusal });
    });
    es.addEventListener('end', () => {
      es.close();
      setSt({ lines, state: 'ended' });
    });
    es.addEventListener('refused', (e) => {
      es.close();
      setSt({ lines, state: 'refused', error: JSON.parse((e as MessageEvent<string>).data) as Refusal });
    });
    return () => es.close();
  }, [ns, run]);
  return st;
}
