/**
 * Cost growth benchmark (issue 17; not a test): how a burst's latency and its CPU per Run change
 * with the namespace's retained (finished) Runs, with the number of Runtime Pods, and with a
 * backlog, and what the extension server's memory costs per retained Run. One local environment
 * (several node-agent nodes), one Runtime; every point: a small warm-up burst, then a burst of
 * BENCH_RUNS Runs (`echo`, concurrency BENCH_CONCURRENCY), Run create -> Succeeded from status
 * timestamps, CPU per Run per component from /proc, and from the extension server's /metrics its
 * heap and resident memory and each function's invocations and time per Run.
 *
 * Order (each axis from the same environment): Runtime Pods (at 0 retained Runs), then the backlog
 * sizes (1 Pod, 0 retained), then retained Runs (1 Pod). Retained Runs are real Run objects that
 * ended: created through the API and given a finished status (a status-subresource patch with the
 * status of a Run that really ran on the same Pod, timestamps moved), written while the extension
 * server is scaled to 0 so no function reacts to them as new Pending Runs; the extension server then
 * starts and lists them like after any restart (docs/benchmarks.md, "Cost growth"). The burst's own
 * Runs are deleted after each point, so the retained count is exact.
 *
 *   npx tsx bench/growth.ts
 *   BENCH_GROWTH_RETAINED=0,200 BENCH_GROWTH_PODS=1,3 BENCH_GROWTH_BACKLOG=100 BENCH_RUNS=30 npx tsx bench/growth.ts
 * Knobs: BENCH_GROWTH_RETAINED (0,1000,10000), BENCH_GROWTH_PODS (1,10,50), BENCH_GROWTH_BACKLOG
 * (250,1000; empty to skip), BENCH_RUNS (100), BENCH_CONCURRENCY (25), BENCH_CAPACITY slots per Pod (64),
 * BENCH_GROWTH_NODES (3), BENCH_KEEP=1 keeps the environment, BENCH_GROWTH_BEFORE=<bundle dir> measures every
 * point twice in the same environment: the extension server restarted on that bundle (built by
 * `npx tsx localenv/bundle.ts` in a checkout of the code before a change) and on this checkout's;
 * dist/ is a link to one of them meanwhile (restored at the end).
 */
import { cpSync, existsSync, lstatSync, renameSync, rmSync, symlinkSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { loadavg } from 'node:os';
import { down, up } from '../localenv/environment.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import type { KubeClient } from '../lib/kube/client.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { isApiError } from '../lib/kube/errors.ts';
import { ListWatch } from '../lib/kube/watch.ts';
import { cpuTicks } from './cpu.ts';
import { benchRuntime } from './runtime.ts';
import { summary } from './stats.ts';
import { podPids, podsOf, rssMb } from './soak/procs.ts';

const list = (v: string | undefined, d: string): number[] =>
  (v ?? d)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map(Number);
const RETAINED = list(process.env.BENCH_GROWTH_RETAINED, '0,1000,10000');
const PODS = list(process.env.BENCH_GROWTH_PODS, '1,10,50');
const BACKLOG = list(process.env.BENCH_GROWTH_BACKLOG, '250,1000');
const RUNS = Number(process.env.BENCH_RUNS ?? '100');
const CONC = Number(process.env.BENCH_CONCURRENCY ?? '25');
const SLOTS = Number(process.env.BENCH_CAPACITY ?? '64');
const NODES = Number(process.env.BENCH_GROWTH_NODES ?? '3');
/** A bundle directory built from the code to compare with (`npx tsx localenv/bundle.ts` in that checkout):
 * every point is then measured twice in the same environment, the extension server restarted on
 * that bundle ("before") and on this checkout's ("after"). */
const BEFORE = process.env.BENCH_GROWTH_BEFORE;
type Variant = 'before' | 'after';
const VARIANTS: Variant[] = BEFORE ? ['before', 'after'] : ['after'];
const NS = 'growth';
const RT = 'growth-bash';
const G = `/apis/kruntimes.io/v1alpha1/namespaces/${NS}`;
const EXT_NS = 'kruntimes-system';
const EXT_SEL = 'app.kubernetes.io/name=kruntimes-extension';
const TERMINAL = ['Succeeded', 'Failed', 'Timeout', 'Cancelled'];
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
/** Fails a wait that lasts longer than `ms` (a benchmark must not hold the cluster lock forever). */
function deadline(what: string, ms: number): () => void {
  const end = Date.now() + ms;
  return () => {
    if (Date.now() > end) throw new Error(`${what}: not done after ${ms / 1000} s`);
  };
}
const log = (m: string): void => void process.stderr.write(`[growth ${new Date().toISOString().slice(11, 19)}] ${m}\n`);

type Run = KubeObject & {
  spec: Record<string, unknown>;
  status?: { phase?: string; completionTime?: string; startTime?: string; [k: string]: unknown };
};

async function pool(n: number, conc: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, conc) }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

/** Retries what a loaded machine may refuse for a moment (429, 5xx, resets). */
async function retry<T>(f: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await f();
    } catch (err) {
      if (i >= 8 || isApiError(err, 409) || isApiError(err, 422) || isApiError(err, 404)) throw err;
      await sleep(100 * 2 ** Math.min(i, 5));
    }
  }
}

// ---- the extension server ----------------------------------------------------------------------

async function extensionPod(api: KubeClient): Promise<(KubeObject & { status?: { podIP?: string } }) | undefined> {
  const pods = await api.list<KubeObject & { status?: { podIP?: string } }>(`/api/v1/namespaces/${EXT_NS}/pods`, {
    labelSelector: EXT_SEL,
  });
  return pods.items.find((p) => p.status?.podIP && !p.metadata.deletionTimestamp);
}

async function metricsText(api: KubeClient): Promise<string> {
  const ip = (await extensionPod(api))?.status?.podIP;
  if (!ip) return '';
  return (await fetch(`http://${ip}:8080/metrics`)).text().catch(() => '');
}

interface ExtMetrics {
  heapMb: number;
  rssMb: number;
  /** controller -> [invocations, seconds] */
  calls: Map<string, [number, number]>;
  cachedRuns: number;
}

async function extMetrics(api: KubeClient, root: string): Promise<ExtMetrics> {
  const text = await metricsText(api);
  const num = (re: RegExp): number => Number(re.exec(text)?.[1] ?? NaN);
  const calls = new Map<string, [number, number]>();
  for (const m of text.matchAll(
    /^controller_runtime_reconcile_time_seconds_(sum|count)\{controller="([^"]+)"\} (\S+)/gm,
  )) {
    const c = calls.get(m[2] ?? '') ?? [0, 0];
    if (m[1] === 'count') c[0] = Number(m[3]);
    else c[1] = Number(m[3]);
    calls.set(m[2] ?? '', c);
  }
  const pods = await podsOf(api, EXT_NS, EXT_SEL).catch(() => []);
  const rss = Math.max(0, ...pods.flatMap((p) => Object.values(podPids(root, p)).map(rssMb)));
  return {
    heapMb: num(/^nodejs_heap_size_used_bytes (\S+)/m) / 2 ** 20,
    rssMb: rss,
    calls,
    cachedRuns: num(/^kruntimes_relay_cached_objects\{resource="\/apis\/kruntimes\.io\/v1alpha1\/runs"\} (\S+)/m),
  };
}

/** Heap and RSS when the extension server is quiet: the smallest of a few samples (garbage comes and goes). */
async function extMemory(
  api: KubeClient,
  root: string,
): Promise<{ heapMb: number; rssMb: number; cachedRuns: number; runtimedMb: number }> {
  let heap = Infinity;
  let rss = Infinity;
  let cached = NaN;
  for (let i = 0; i < 5; i++) {
    const m = await extMetrics(api, root);
    heap = Math.min(heap, m.heapMb);
    rss = Math.min(rss, m.rssMb);
    cached = m.cachedRuns;
    await sleep(1000);
  }
  const pods = await podsOf(api, NS, `runtime=${RT}`).catch(() => []);
  const runtimedMb = Math.max(0, ...pods.map((p) => rssMb(podPids(root, p).runtimed)));
  return { heapMb: heap, rssMb: rss, cachedRuns: cached, runtimedMb };
}

async function scaleExtension(api: KubeClient, replicas: number): Promise<void> {
  await api.patch(`/apis/apps/v1/namespaces/${EXT_NS}/deployments/kruntimes-extension`, { spec: { replicas } });
  const check = deadline(`extension server at ${replicas} replicas`, 120_000);
  for (;;) {
    check();
    const pods = await api.list<KubeObject & { status?: { conditions?: { type: string; status: string }[] } }>(
      `/api/v1/namespaces/${EXT_NS}/pods`,
      { labelSelector: EXT_SEL },
    );
    const ready = pods.items.filter(
      (p) =>
        !p.metadata.deletionTimestamp && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
    );
    if (replicas === 0 ? pods.items.length === 0 : ready.length >= replicas) return;
    await sleep(200);
  }
}

/** dist/ becomes a link to dist-after/ (this checkout's build) or dist-before/ (BENCH_GROWTH_BEFORE's copy). */
function setupBundles(): void {
  if (!BEFORE) return;
  const dist = join(REPO_ROOT, 'dist');
  rmSync(join(REPO_ROOT, 'dist-after'), { recursive: true, force: true });
  rmSync(join(REPO_ROOT, 'dist-before'), { recursive: true, force: true });
  renameSync(dist, join(REPO_ROOT, 'dist-after'));
  cpSync(BEFORE, join(REPO_ROOT, 'dist-before'), { recursive: true });
  symlinkSync('dist-after', dist);
}

function useBundle(v: Variant): void {
  if (!BEFORE) return;
  const dist = join(REPO_ROOT, 'dist');
  unlinkSync(dist);
  symlinkSync(v === 'before' ? 'dist-before' : 'dist-after', dist);
}

function restoreBundles(): void {
  const dist = join(REPO_ROOT, 'dist');
  if (!BEFORE || !existsSync(join(REPO_ROOT, 'dist-after'))) return;
  if (lstatSync(dist, { throwIfNoEntry: false })?.isSymbolicLink()) unlinkSync(dist);
  renameSync(join(REPO_ROOT, 'dist-after'), dist);
  rmSync(join(REPO_ROOT, 'dist-before'), { recursive: true, force: true });
}

/** The extension server restarted on a variant's bundle, its relay caching the namespace's `runs` Runs. */
async function restartOn(api: KubeClient, root: string, v: Variant, runs: number): Promise<void> {
  await scaleExtension(api, 0);
  useBundle(v);
  await scaleExtension(api, 1);
  // Ready may come before the new process leads; wait until its relay caches every Run.
  const cached = async (): Promise<number> => (await extMetrics(api, root).catch(() => undefined))?.cachedRuns ?? NaN;
  const check = deadline(`the extension server's relay caching ${runs} Runs`, 120_000);
  while (!((await cached()) >= runs)) {
    check();
    await sleep(250);
  }
}

// ---- the Runtime ---------------------------------------------------------------------------------

type PodObj = KubeObject & { status?: { conditions?: { type: string; status: string }[] } };

async function readyPods(api: KubeClient): Promise<PodObj[]> {
  const pods = await api.list<PodObj>(`/api/v1/namespaces/${NS}/pods`, { labelSelector: `runtime=${RT}` });
  return pods.items.filter(
    (p) =>
      !p.metadata.deletionTimestamp &&
      p.status?.conditions?.some((c) => c.type === 'kruntimes.io/RuntimedReady' && c.status === 'True') &&
      p.status.conditions.some((c) => c.type === 'Ready' && c.status === 'True'),
  );
}

/** Scales the Runtime and waits until exactly `n` Pods are ready and no other is left; returns ms. */
async function scaleRuntime(api: KubeClient, n: number): Promise<number> {
  const t0 = performance.now();
  await api.patch(`${G}/runtimes/${RT}`, { spec: { replicas: n } });
  const check = deadline(`Runtime at ${n} Pods`, 300_000);
  for (;;) {
    check();
    const all = (await api.list<PodObj>(`/api/v1/namespaces/${NS}/pods`, { labelSelector: `runtime=${RT}` })).items;
    if (all.length === n && (await readyPods(api)).length === n) return performance.now() - t0;
    await sleep(200);
  }
}

// ---- bursts --------------------------------------------------------------------------------------

interface BurstResult {
  p50: number;
  p95: number;
  wallS: number;
  ok: number;
  n: number;
  done: Run[];
}

/** n Runs with the given concurrency; resolves when all ended. */
async function burst(api: KubeClient, tag: string, n: number, conc: number): Promise<BurstResult> {
  const created: Record<string, number> = {};
  const done = new Map<string, Run>();
  let resolveAll: () => void = () => undefined;
  const all = new Promise<void>((r) => (resolveAll = r));
  const watch = new ListWatch<Run>(api, { path: `${G}/runs`, labelSelector: `growth/burst=${tag}` }, (d) => {
    if (TERMINAL.includes(d.object.status?.phase ?? '')) {
      done.set(d.object.metadata.name ?? '', d.object);
      if (done.size >= n) resolveAll();
    }
  });
  watch.start();
  await watch.synced;
  const t0 = Date.now();
  const timer = setTimeout(() => resolveAll(), 300_000);
  await pool(n, conc, async (i) => {
    const name = `${tag}-${i}`;
    created[name] = Date.now();
    await retry(() =>
      api.create(`${G}/runs`, {
        apiVersion: 'kruntimes.io/v1alpha1',
        kind: 'Run',
        metadata: { name, labels: { 'growth/burst': tag } },
        spec: { runtime: RT, mode: { task: { args: [`echo growth-${i}`] } } },
      }),
    );
  });
  await all;
  clearTimeout(timer);
  watch.stop();
  if (done.size < n) throw new Error(`burst ${tag}: ${done.size}/${n} Runs ended after 300 s`);
  const runs = [...done.values()];
  const end = (r: Run): number => Date.parse(r.status?.completionTime ?? '');
  const s = summary(runs.map((r) => end(r) - (created[r.metadata.name ?? ''] ?? 0)));
  return {
    p50: s.p50,
    p95: s.p95,
    wallS: (Math.max(...runs.map(end)) - t0) / 1000,
    ok: runs.filter((r) => r.status?.phase === 'Succeeded').length,
    n,
    done: runs,
  };
}

/** Deletes a burst's Runs and waits until they are gone (the retained count stays exact). */
async function removeBurst(api: KubeClient, tag: string): Promise<void> {
  await api.request('DELETE', `${G}/runs`, { query: { labelSelector: `growth/burst=${tag}` } });
  while ((await api.list(`${G}/runs`, { labelSelector: `growth/burst=${tag}`, limit: 1 })).items.length)
    await sleep(200);
}

// ---- one measured point --------------------------------------------------------------------------

interface Point {
  label: string;
  variant: Variant;
  retained: number;
  pods: number;
  runs: number;
  p50: number;
  p95: number;
  tput: number;
  /** First create -> last completion (s): a backlog's drain time. */
  wallS: number;
  ok: number;
  cpuPerRun: number;
  byComponent: Map<string, number>;
  /** Function invocations and their time (ms) per Run of the burst. */
  calls: Map<string, [number, number]>;
  heapMb: number;
  rssMb: number;
  load: number;
}

function perRun(before: Map<string, number>, after: Map<string, number>, n: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const [k, v] of after) {
    const d = ((v - (before.get(k) ?? 0)) * 10) / n;
    if (d > 0) out.set(k, d);
  }
  return out;
}

function callsPerRun(a: ExtMetrics, b: ExtMetrics, n: number): Map<string, [number, number]> {
  const out = new Map<string, [number, number]>();
  for (const [k, [c1, s1]] of b.calls) {
    const [c0, s0] = a.calls.get(k) ?? [0, 0];
    if (c1 > c0) out.set(k, [(c1 - c0) / n, ((s1 - s0) * 1000) / n]);
  }
  return out;
}

let seq = 0;
/** A warm-up burst, then the measured burst (its CPU and function calls), then its Runs are deleted. */
async function point(
  ctx: { api: KubeClient; root: string; mine: (cmd: string) => boolean },
  label: string,
  shape: { retained: number; pods: number; runs: number; conc: number; warm: number; variant: Variant },
): Promise<Point> {
  const { api, root, mine } = ctx;
  const warm = `w${seq}`;
  const tag = `b${seq++}`;
  await burst(api, warm, shape.warm, Math.min(shape.warm, CONC));
  await removeBurst(api, warm);
  await sleep(1500);
  const m0 = await extMetrics(api, root);
  const c0 = cpuTicks(mine);
  const load = loadavg()[0] ?? NaN;
  const r = await burst(api, tag, shape.runs, shape.conc);
  const c1 = cpuTicks(mine);
  const m1 = await extMetrics(api, root);
  const byComponent = perRun(c0, c1, shape.runs);
  const p: Point = {
    label,
    variant: shape.variant,
    retained: shape.retained,
    pods: shape.pods,
    runs: shape.runs,
    p50: r.p50,
    p95: r.p95,
    tput: r.ok / r.wallS,
    wallS: r.wallS,
    ok: r.ok,
    cpuPerRun: [...byComponent.values()].reduce((a, b) => a + b, 0),
    byComponent,
    calls: callsPerRun(m0, m1, shape.runs),
    heapMb: m1.heapMb,
    rssMb: m1.rssMb,
    load: (load + (loadavg()[0] ?? NaN)) / 2,
  };
  log(`${label} ${shape.variant}: ${formatPoint(p)}`);
  // The retained Runs copy the latest finished Run's status (a Pod of the Runtime as it is now).
  template = r.done.find((x) => x.status?.phase === 'Succeeded') ?? template;
  await removeBurst(api, tag);
  return p;
}

const f1 = (n: number): string => (Number.isFinite(n) ? n.toFixed(1) : 'n/a');

function formatPoint(p: Point): string {
  const comps = [...p.byComponent.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${f1(v)}`)
    .join(', ');
  const calls = [...p.calls.entries()]
    .sort((a, b) => b[1][1] - a[1][1])
    .map(([k, [c, ms]]) => `${k} ${c.toFixed(2)}x/${ms.toFixed(2)} ms`)
    .join(', ');
  return [
    `${p.runs} Runs (${p.ok} ok), p50 ${f1(p.p50)} ms, p95 ${f1(p.p95)} ms, ${f1(p.tput)} Runs/s, CPU/Run ${f1(p.cpuPerRun)} ms [${comps}]`,
    `    functions per Run (invocations/time): ${calls || 'none'}; extension heap ${f1(p.heapMb)} MiB, RSS ${f1(p.rssMb)} MiB; load ${f1(p.load)}`,
  ].join('\n');
}

// ---- retained Runs -------------------------------------------------------------------------------

/** A Run that really ran on the Runtime's Pod: its status is the retained Runs' status. */
let template: Run | undefined;

/** The finished status of retained Run i: the template's, its timestamps moved back (distinct, in the past). */
function retainedStatus(i: number): Record<string, unknown> {
  const s = structuredClone(template?.status ?? {});
  const shift = (iso: unknown): unknown =>
    typeof iso === 'string' && /^\d{4}-/.test(iso)
      ? new Date(Date.parse(iso) - 3_600_000 - i * 1000).toISOString()
      : iso;
  for (const k of ['startTime', 'completionTime']) if (s[k]) s[k] = shift(s[k]);
  const conds = s.conditions as { lastTransitionTime?: string }[] | undefined;
  for (const c of conds ?? []) c.lastTransitionTime = shift(c.lastTransitionTime) as string;
  return s;
}

/** Grows the namespace's retained Runs from `have` to `want` (extension server scaled to 0; the caller starts it). */
async function retain(api: KubeClient, have: number, want: number): Promise<number> {
  if (!template) throw new Error('no finished Run to copy the status from');
  const t0 = performance.now();
  await scaleExtension(api, 0);
  await pool(want - have, 48, async (k) => {
    const i = have + k;
    const name = `retained-${i}`;
    const created = await retry(() =>
      api.create<Run>(`${G}/runs`, {
        apiVersion: 'kruntimes.io/v1alpha1',
        kind: 'Run',
        metadata: { name, labels: { 'growth/retained': 'true' } },
        spec: { runtime: RT, mode: { task: { args: [`echo retained-${i}`] } } },
      }),
    );
    await retry(() =>
      api.patch(`${G}/runs/${name}/status`, {
        metadata: { resourceVersion: created.metadata.resourceVersion },
        status: retainedStatus(i),
      }),
    );
  });
  log(`retained ${have} -> ${want}: written in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return performance.now() - t0;
}

// ---- the run -------------------------------------------------------------------------------------

interface Result {
  pods: Point[];
  backlog: Point[];
  retained: Point[];
  memory: {
    retained: number;
    variant: Variant;
    heapMb: number;
    rssMb: number;
    cachedRuns: number;
    runtimedMb: number;
  }[];
  scaleMs: Map<number, number>;
}

type Ctx = { api: KubeClient; root: string; mine: (cmd: string) => boolean };
type Shape = { retained: number; pods: number; runs: number; conc: number; warm: number };

/** One point per variant, each on an extension server restarted on its bundle. */
async function points(ctx: Ctx, label: string, shape: Shape, out: Point[]): Promise<void> {
  for (const variant of VARIANTS) {
    await restartOn(ctx.api, ctx.root, variant, shape.retained);
    out.push(await point(ctx, label, { ...shape, variant }));
  }
}

async function axes(ctx: Ctx): Promise<Result> {
  const { api, root } = ctx;
  const res: Result = { pods: [], backlog: [], retained: [], memory: [], scaleMs: new Map() };
  for (const n of PODS) {
    res.scaleMs.set(n, await scaleRuntime(api, n));
    log(`Runtime at ${n} Pods (${(res.scaleMs.get(n)! / 1000).toFixed(1)} s)`);
    const warm = Math.max(10, 2 * n);
    await points(ctx, `pods=${n}`, { retained: 0, pods: n, runs: RUNS, conc: CONC, warm }, res.pods);
  }
  if (PODS.at(-1) !== 1) await scaleRuntime(api, 1);
  for (const n of BACKLOG)
    await points(ctx, `backlog=${n}`, { retained: 0, pods: 1, runs: n, conc: 50, warm: 10 }, res.backlog);
  if (!BACKLOG.length)
    await point(ctx, 'template', { retained: 0, pods: 1, runs: 5, conc: 5, warm: 1, variant: 'after' });
  let have = 0;
  for (const want of RETAINED) {
    if (want > have) await retain(api, have, want);
    have = Math.max(have, want);
    for (const variant of VARIANTS) {
      await restartOn(api, root, variant, have);
      const shape = { retained: have, pods: 1, runs: RUNS, conc: CONC, warm: 10, variant };
      res.retained.push(await point(ctx, `retained=${have}`, shape));
      res.memory.push({ retained: have, variant, ...(await extMemory(api, root)) });
    }
  }
  return res;
}

function table(title: string, axis: (p: Point) => string, all: Point[]): string {
  const rows = all.map((p) => {
    const base = all.find((x) => x.variant === p.variant);
    const before = all.find((x) => x.variant === 'before' && x.label === p.label);
    const top = [...p.byComponent.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 4)
      .map(([k, v]) => `${k} ${f1(v)}`)
      .join(', ');
    const sched = p.calls.get('run-scheduler');
    const r = (a: number, b: number | undefined): string => (b ? `${(a / b).toFixed(2)}x` : 'n/a');
    const vsBefore =
      p.variant === 'after' && before
        ? `p50 ${r(p.p50, before.p50)}, CPU ${r(p.cpuPerRun, before.cpuPerRun)}, ext ${r(p.byComponent.get('extension-server') ?? 0, before.byComponent.get('extension-server'))}`
        : '';
    return `| ${axis(p)} | ${p.variant} | ${p.ok}/${p.runs} | ${f1(p.p50)} (${r(p.p50, base?.p50)}) | ${f1(p.p95)} | ${f1(p.wallS)} | ${f1(p.tput)} | ${f1(p.cpuPerRun)} (${r(p.cpuPerRun, base?.cpuPerRun)}) | ${top} | ${sched ? `${sched[0].toFixed(2)} / ${sched[1].toFixed(1)}` : 'n/a'} | ${f1(p.heapMb)} / ${f1(p.rssMb)} | ${f1(p.load)} | ${vsBefore} |`;
  });
  return [
    `${title}`,
    '| point | code | ok | p50 ms (vs first point) | p95 ms | drain s | Runs/s | CPU ms per Run (vs first point) | by component (ms per Run) | scheduler calls / wall ms per Run | ext heap / RSS MiB | load | after vs before |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
  ].join('\n');
}

function report(r: Result): string {
  const mem = r.memory.map(
    (m) =>
      `| ${m.retained} | ${m.variant} | ${m.cachedRuns} | ${f1(m.heapMb)} | ${f1(m.rssMb)} | ${f1(m.runtimedMb)} |`,
  );
  const per10k = VARIANTS.map((v) => {
    const ms = r.memory.filter((m) => m.variant === v);
    const first = ms[0];
    const last = ms.at(-1);
    if (!first || !last || last.retained <= first.retained) return '';
    const k = 10_000 / (last.retained - first.retained);
    return ` ${v}: heap +${f1((last.heapMb - first.heapMb) * k)} MiB, RSS +${f1((last.rssMb - first.rssMb) * k)} MiB per 10k retained Runs;`;
  }).join('');
  return [
    `growth: ${RUNS}-Run bursts at concurrency ${CONC}, ${SLOTS} slots per Pod, ${NODES} node-agent nodes; Runtime scale-up to ready: ${[...r.scaleMs.entries()].map(([n, ms]) => `${n} Pods ${(ms / 1000).toFixed(1)} s`).join(', ')}`,
    '',
    table('Runtime Pods (0 retained Runs)', (p) => `${p.pods} Pods`, r.pods),
    table('Backlog (created at once, concurrency 50; 1 Pod, 0 retained)', (p) => `${p.runs} Runs`, r.backlog),
    table('Retained (finished) Runs in the namespace (1 Pod)', (p) => `${p.retained} retained`, r.retained),
    `Extension server restarted with the retained Runs, after the point's bursts (quiet, smallest of 5 samples):${per10k}`,
    '| retained | code | Runs cached | heap MiB | RSS MiB | runtimed RSS MiB (its Pod ran them all) |',
    '|---|---|---|---|---|---|',
    ...mem,
    '',
  ].join('\n');
}

async function main(): Promise<void> {
  const root = join(REPO_ROOT, '.kruntimes', 'bench', `growth-${process.pid}`);
  const nodes = Array.from({ length: NODES }, (_, i) => `growth-${String.fromCharCode(97 + i)}`);
  const t0 = Date.now();
  const env = await up({ root, nodes, ...(process.env.KRT_BIN_DIR ? { binDir: process.env.KRT_BIN_DIR } : {}) });
  log(`environment up in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  const api = env.admin;
  try {
    setupBundles();
    await api.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    await api.create(`${G}/runtimes`, benchRuntime(RT, PODS[0] ?? 1, SLOTS));
    const mine = (cmd: string): boolean => cmd.includes(root);
    const r = await axes({ api, root, mine });
    process.stdout.write(report(r));
    process.stdout.write(`cluster time ${((Date.now() - t0) / 1000).toFixed(0)} s\n`);
  } finally {
    api.close();
    if (process.env.BENCH_KEEP !== '1') await down(root, { purge: true });
    restoreBundles();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
