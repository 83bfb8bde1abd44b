/**
 * What a process's resident memory is made of, read from outside (bench only):
 *
 * - a Node process (the extension server): its inspector is opened with SIGUSR1 (Node's own
 *   switch; nothing in the product listens for it), two full garbage collections are forced over
 *   the DevTools protocol, then `process.memoryUsage()` is read (and, when asked, a heap snapshot
 *   written) and the inspector is closed again. The live heap after a forced GC is what the
 *   process really retains; RSS minus that is memory the runtime has not returned to the OS.
 * - a Go process (kube-apiserver, etcd): its /metrics `go_memstats_*` gauges (heap in use versus
 *   heap idle and not yet released).
 */
import { createWriteStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeClient } from '../../lib/kube/client.ts';
import { rssMb } from './procs.ts';

const MB = 1024 * 1024;

export interface NodeHeap {
  rssMb: number;
  heapUsedMb: number;
  heapTotalMb: number;
  externalMb: number;
  arrayBuffersMb: number;
}

export interface GoHeap {
  rssMb: number;
  heapInuseMb: number;
  heapIdleMb: number;
  heapReleasedMb: number;
}

/** The Go runtime's memory gauges in a Prometheus text exposition (undefined: not a Go process's). */
export function goHeapOf(text: string): GoHeap | undefined {
  const gauge = (name: string): number | undefined => {
    const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
    return m ? Number(m[1]) / MB : undefined;
  };
  const inuse = gauge('go_memstats_heap_inuse_bytes');
  const idle = gauge('go_memstats_heap_idle_bytes');
  const released = gauge('go_memstats_heap_released_bytes');
  const rss = gauge('process_resident_memory_bytes');
  if (inuse === undefined || idle === undefined || released === undefined || rss === undefined) return undefined;
  return { rssMb: rss, heapInuseMb: inuse, heapIdleMb: idle, heapReleasedMb: released };
}

/**
 * kube-apiserver's Go heap after a forced GC: its pprof heap endpoint (`gc=1` collects first; the
 * profile goes to `profile` when given, for `go tool pprof`), then its /metrics gauges.
 */
export async function apiserverGoHeap(api: KubeClient, profile?: string): Promise<GoHeap | undefined> {
  const prof = await api.stream('/debug/pprof/heap?gc=1');
  if (profile) await pipeline(prof, createWriteStream(profile));
  else for await (const _ of prof);
  const res = await api.stream('/metrics');
  let text = '';
  res.setEncoding('utf8');
  for await (const chunk of res) text += chunk as string;
  return goHeapOf(text);
}

export async function etcdGoHeap(clientPort: number): Promise<GoHeap | undefined> {
  const res = await fetch(`http://127.0.0.1:${clientPort}/metrics`);
  return goHeapOf(await res.text());
}

const INSPECTOR_PORT = 9229;

interface Cdp {
  call<T = unknown>(method: string, params?: object): Promise<T>;
  on(method: string, fn: (params: Record<string, unknown>) => void): void;
  close(): void;
}

async function connect(url: string): Promise<Cdp> {
  const ws = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    ws.onopen = () => resolve();
    ws.onerror = () => reject(new Error(`inspector ${url}: connection failed`));
  });
  let next = 1;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  const handlers = new Map<string, (p: Record<string, unknown>) => void>();
  ws.onmessage = (ev) => {
    const m = JSON.parse(String(ev.data)) as {
      id?: number;
      result?: unknown;
      error?: { message: string };
      method?: string;
      params?: Record<string, unknown>;
    };
    if (m.id !== undefined) {
      const p = pending.get(m.id);
      pending.delete(m.id);
      if (m.error) p?.reject(new Error(m.error.message));
      else p?.resolve(m.result);
    } else if (m.method) handlers.get(m.method)?.(m.params ?? {});
  };
  return {
    call: <T>(method: string, params: object = {}) =>
      new Promise<T>((resolve, reject) => {
        const id = next++;
        pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
        ws.send(JSON.stringify({ id, method, params }));
      }),
    on: (method, fn) => void handlers.set(method, fn),
    close: () => ws.close(),
  };
}

async function inspectorUrl(): Promise<string | undefined> {
  try {
    const res = await fetch(`http://127.0.0.1:${INSPECTOR_PORT}/json/list`);
    return ((await res.json()) as { webSocketDebuggerUrl: string }[])[0]?.webSocketDebuggerUrl;
  } catch {
    return undefined;
  }
}

/** Opens the inspector of a Node process (SIGUSR1) and returns its DevTools WebSocket URL. */
async function openInspector(pid: number): Promise<string> {
  // One inspector at a time on the port: wait until the previous one closed.
  for (let i = 0; i < 25 && (await inspectorUrl()); i++) await sleep(200);
  process.kill(pid, 'SIGUSR1');
  const until = Date.now() + 10_000;
  for (;;) {
    const url = await inspectorUrl();
    if (url) return url;
    if (Date.now() > until) throw new Error(`pid ${pid}: its inspector did not open on port ${INSPECTOR_PORT}`);
    await sleep(200);
  }
}

async function evaluate<T>(cdp: Cdp, expression: string): Promise<T> {
  const r = await cdp.call<{ result: { value: T }; exceptionDetails?: unknown }>('Runtime.evaluate', {
    expression,
    returnByValue: true,
  });
  if (r.exceptionDetails) throw new Error(`evaluate ${expression}: ${JSON.stringify(r.exceptionDetails)}`);
  return r.result.value;
}

async function writeSnapshot(cdp: Cdp, file: string): Promise<void> {
  const out = createWriteStream(file);
  cdp.on('HeapProfiler.addHeapSnapshotChunk', (p) => void out.write(String(p.chunk)));
  await cdp.call('HeapProfiler.takeHeapSnapshot', { reportProgress: false });
  await new Promise<void>((r) => out.end(r));
}

/**
 * The live heap of a Node process after two forced full GCs (and a heap snapshot into `snapshot`
 * when given). The inspector is closed again afterwards (once this client has disconnected).
 */
export async function nodeHeapAfterGc(pid: number, snapshot?: string): Promise<NodeHeap> {
  const cdp = await connect(await openInspector(pid));
  try {
    const inspected = await evaluate<number>(cdp, 'process.pid');
    if (inspected !== pid)
      throw new Error(`the inspector on port ${INSPECTOR_PORT} is pid ${inspected}'s, not ${pid}'s`);
    await cdp.call('HeapProfiler.collectGarbage');
    await cdp.call('HeapProfiler.collectGarbage');
    const u = await evaluate<Record<string, number>>(cdp, 'process.memoryUsage()');
    if (snapshot) await writeSnapshot(cdp, snapshot);
    // inspector.close() waits for its sessions to end: run it once this one has gone.
    await evaluate(cdp, "setTimeout(() => process.getBuiltinModule('node:inspector').close(), 500).unref(), 0");
    return {
      rssMb: rssMb(pid),
      heapUsedMb: (u.heapUsed ?? 0) / MB,
      heapTotalMb: (u.heapTotal ?? 0) / MB,
      externalMb: (u.external ?? 0) / MB,
      arrayBuffersMb: (u.arrayBuffers ?? 0) / MB,
    };
  } finally {
    cdp.close();
  }
}
