/**
 * Function transports benchmark (issue 13; not a test): the hot-path Run burst measured with the
 * relay invoking every watch function `inprocess`, over the `webhook` transport (the local
 * function server Deployment) and over the `lambda` transport (Runtime Interface Emulator +
 * aws-lambda-ric, host processes, e2e/lambda-rie.ts), one after the other in the same environment.
 * Each transport is switched by configuration only (the extension Deployment's env, the function
 * server's replicas), warmed with a few Runs, then measured: N Runs created with concurrency C on
 * 2 Runtime Pods, complete latency from the Runs' status and throughput, and the CPU per Run of
 * every process of the environment (the function server and the emulators included).
 * After each burst, the seed demo (examples/workflows/ci-data-sharing-demo.yaml: 2 jobs, 4 step
 * Runs, one artifact) runs BENCH_DEMOS times one after the other on the same transport: trigger to
 * Succeeded and CPU per WorkflowRun.
 *   npx tsx bench/transports.ts            # 50 Runs, concurrency 25, 4 Lambda execution environments, 5 demos
 *   BENCH_ROUNDS=2 npx tsx bench/transports.ts   # each transport twice, interleaved
 */
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { renderRun } from '../cli/wf/commands.ts';
import { down, up } from '../localenv/environment.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import { PatchType, type KubeClient } from '../lib/kube/client.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { ListWatch } from '../lib/kube/watch.ts';
import { startLambdaRie, type LambdaRie } from '../e2e/lambda-rie.ts';
import { cpuTicks, cpuTotalMs } from './cpu.ts';
import { benchRuntime } from './runtime.ts';
import { ms, summary } from './stats.ts';

const RUNS = Number(process.env.BENCH_RUNS ?? '50');
const CONC = Number(process.env.BENCH_CONCURRENCY ?? '25');
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? '1');
const LAMBDA_ENVS = Number(process.env.BENCH_LAMBDA_ENVS ?? '4');
const DEMOS = Number(process.env.BENCH_DEMOS ?? '5');
const NS = 'bench';
const SYS = '/apis/apps/v1/namespaces/kruntimes-system/deployments';
type Transport = 'inprocess' | 'webhook' | 'lambda';
type Run = KubeObject & { status?: { phase?: string; completionTime?: string } };
type Deploy = KubeObject & {
  metadata: { generation?: number };
  spec: { replicas?: number };
  status?: { observedGeneration?: number; replicas?: number; updatedReplicas?: number; availableReplicas?: number };
};

async function rolledOut(api: KubeClient, name: string): Promise<void> {
  for (;;) {
    const d = await api.get<Deploy>(`${SYS}/${name}`);
    const s = d.status ?? {};
    const want = d.spec.replicas ?? 1;
    if (
      (s.observedGeneration ?? 0) >= (d.metadata.generation ?? 0) &&
      (s.replicas ?? 0) === want &&
      (s.updatedReplicas ?? 0) === want &&
      (s.availableReplicas ?? 0) === want
    )
      return;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The transport switch: the extension Deployment's env and the function server's replicas. */
async function use(api: KubeClient, t: Transport, rie: LambdaRie): Promise<void> {
  const set = (name: string, value: string | undefined): Record<string, string> =>
    value === undefined ? { name, $patch: 'delete' } : { name, value };
  const env = [
    set('KRT_FUNCTION_TRANSPORT', t === 'inprocess' ? undefined : t),
    set('KRT_LAMBDA_ENDPOINT', t === 'lambda' ? rie.env.KRT_LAMBDA_ENDPOINT : undefined),
    set('KRT_LAMBDA_FUNCTION_NAME', t === 'lambda' ? rie.env.KRT_LAMBDA_FUNCTION_NAME : undefined),
  ];
  await api.patch(`${SYS}/kruntimes-functions`, { spec: { replicas: t === 'webhook' ? 1 : 0 } }, PatchType.merge);
  await api.patch(
    `${SYS}/kruntimes-extension`,
    { spec: { template: { spec: { containers: [{ name: 'server', env }] } } } },
    PatchType.strategic,
  );
  await rolledOut(api, 'kruntimes-functions');
  await rolledOut(api, 'kruntimes-extension');
}

async function pool(n: number, conc: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: conc }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

/** N Runs with concurrency C, each `echo`; complete latencies (create -> completionTime) and wall time. */
async function burst(
  api: KubeClient,
  tag: string,
  n: number,
): Promise<{ complete: number[]; wallS: number; ok: number }> {
  const created: Record<string, number> = {};
  const done = new Map<string, Run>();
  let resolveAll: () => void = () => undefined;
  const all = new Promise<void>((r) => (resolveAll = r));
  const watch = new ListWatch<Run>(
    api,
    { path: `/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runs`, labelSelector: `bench-tag=${tag}` },
    (d) => {
      if (!['Succeeded', 'Failed', 'Timeout', 'Cancelled'].includes(d.object.status?.phase ?? '')) return;
      done.set(d.object.metadata.name ?? '', d.object);
      if (done.size >= n) resolveAll();
    },
  );
  watch.start();
  await watch.synced;
  const t0 = Date.now();
  await pool(n, Math.min(CONC, n), async (i) => {
    const name = `${tag}-${i}`;
    created[name] = Date.now();
    await api.create(`/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runs`, {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'Run',
      metadata: { name, labels: { 'bench-tag': tag } },
      spec: { runtime: 'bench-bash', mode: { task: { args: [`echo ${name}`] } }, ttlSecondsAfterFinished: 300 },
    });
  });
  await all;
  watch.stop();
  const runs = [...done.values()];
  const end = (r: Run): number => Date.parse(r.status?.completionTime ?? '');
  return {
    complete: runs.map((r) => end(r) - (created[r.metadata.name ?? ''] ?? 0)),
    wallS: (Math.max(...runs.map(end)) - t0) / 1000,
    ok: runs.filter((r) => r.status?.phase === 'Succeeded').length,
  };
}

interface Row {
  t: Transport;
  p50: number;
  p95: number;
  tput: number;
  cpuPerRun: number;
  ok: number;
  /** Function invocations (reconciles, any transport) per Run, from the relay's metrics. */
  callsPerRun: number;
  /** run-ttl invocations per Run of the burst. */
  ttlPerRun: number;
  /** Seed demo: trigger -> Succeeded p50 and CPU per WorkflowRun (NaN when BENCH_DEMOS=0). */
  demoP50: number;
  demoCpu: number;
}

/** Reconciles so far per function, from the extension server's /metrics (any transport). */
async function reconciles(api: KubeClient): Promise<Record<string, number>> {
  const pods = await api.list<KubeObject & { status?: { podIP?: string } }>(
    '/api/v1/namespaces/kruntimes-system/pods',
    { labelSelector: 'app.kubernetes.io/name=kruntimes-extension' },
  );
  const ip = pods.items.find((p) => p.status?.podIP && !p.metadata.deletionTimestamp)?.status?.podIP;
  const text = ip ? await (await fetch(`http://${ip}:8080/metrics`)).text() : '';
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^controller_runtime_reconcile_total\{([^}]*)\} (\d+)/gm)) {
    const fn = /controller="([^"]+)"/.exec(m[1] ?? '')?.[1] ?? '';
    out[fn] = (out[fn] ?? 0) + Number(m[2]);
  }
  return out;
}

async function measure(api: KubeClient, t: Transport, round: number, mine: (cmd: string) => boolean): Promise<Row> {
  await burst(api, `warm-${t}-${round}`, 5);
  const [before, calls0] = [cpuTicks(mine), await reconciles(api)];
  const r = await burst(api, `b-${t}-${round}`, RUNS);
  const cpu = cpuTotalMs(before, cpuTicks(mine));
  const calls1 = await reconciles(api);
  const perFn = Object.entries(calls1).map(([fn, n]) => [fn, n - (calls0[fn] ?? 0)] as const);
  process.stdout.write(`  ${t} invocations: ${perFn.map(([fn, n]) => `${fn}=${n}`).join(' ')}\n`);
  const s = summary(r.complete);
  const callsPerRun = perFn.reduce((a, [, n]) => a + n, 0) / RUNS;
  const ttlPerRun = (perFn.find(([fn]) => fn === 'run-ttl')?.[1] ?? 0) / RUNS;
  const c0 = cpuTicks(mine);
  const demo = await demos(api, `${t}-${round}`);
  const demoCpu = DEMOS ? cpuTotalMs(c0, cpuTicks(mine)) / DEMOS : NaN;
  const base = { t, p50: s.p50, p95: s.p95, tput: r.ok / r.wallS, cpuPerRun: cpu / RUNS, ok: r.ok };
  return { ...base, callsPerRun, ttlPerRun, demoP50: DEMOS ? summary(demo).p50 : NaN, demoCpu };
}

type Wfr = KubeObject & { status?: { phase?: string } };
const G = `/apis/kruntimes.io/v1alpha1/namespaces/${NS}`;

/** The seed demo's Runtime (`bash`, Filesystem artifact store on a shared volume), ready. */
async function demoRuntime(api: KubeClient): Promise<void> {
  const docs = parseAllDocuments(readFileSync(join(REPO_ROOT, 'examples/workflows/runtime-bash.yaml'), 'utf8'));
  for (const doc of docs.map((d) => d.toJSON() as KubeObject & { kind: string }))
    await api.create(doc.kind === 'Runtime' ? `${G}/runtimes` : `/api/v1/namespaces/${NS}/persistentvolumeclaims`, doc);
  for (;;) {
    const rt = await api.get<KubeObject & { status?: { readyReplicas?: number } }>(`${G}/runtimes/bash`);
    if ((rt.status?.readyReplicas ?? 0) > 0) return;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** BENCH_DEMOS seed demo WorkflowRuns one after the other: trigger -> Succeeded of each (ms). */
async function demos(api: KubeClient, tag: string): Promise<number[]> {
  const wf = parse(readFileSync(join(REPO_ROOT, 'examples/workflows/ci-data-sharing-demo.yaml'), 'utf8')) as never;
  const out: number[] = [];
  for (let i = 0; i < DEMOS; i++) {
    const name = `demo-${tag}-${i}`;
    const done = new Promise<Wfr>((resolve) => {
      const lw: ListWatch<Wfr> = new ListWatch<Wfr>(
        api,
        { path: `${G}/workflowruns`, fieldSelector: `metadata.name=${name}` },
        (d) => {
          if (!['Succeeded', 'Failed', 'Cancelled'].includes(d.object.status?.phase ?? '')) return;
          lw.stop();
          resolve(d.object);
        },
      );
      lw.start();
    });
    const t0 = Date.now();
    await api.create(`${G}/workflowruns`, renderRun(wf, {}, name));
    const w = await done;
    if (w.status?.phase !== 'Succeeded') throw new Error(`${name}: ${w.status?.phase}`);
    out.push(Date.now() - t0);
  }
  return out;
}

/** Each transport's median over the rounds, and its ratios to inprocess (the issue's target: 1.15x). */
function report(rows: Row[]): void {
  const med = (xs: number[]): number => {
    const s = [...xs].sort((x, y) => x - y);
    const m = Math.floor(s.length / 2);
    return s.length % 2 ? (s[m] ?? NaN) : ((s[m - 1] ?? NaN) + (s[m] ?? NaN)) / 2;
  };
  const of = (t: Transport): Row => {
    const r = rows.filter((x) => x.t === t);
    return {
      t,
      p50: med(r.map((x) => x.p50)),
      p95: med(r.map((x) => x.p95)),
      tput: med(r.map((x) => x.tput)),
      cpuPerRun: med(r.map((x) => x.cpuPerRun)),
      ok: Math.min(...r.map((x) => x.ok)),
      callsPerRun: med(r.map((x) => x.callsPerRun)),
      ttlPerRun: med(r.map((x) => x.ttlPerRun)),
      demoP50: med(r.map((x) => x.demoP50)),
      demoCpu: med(r.map((x) => x.demoCpu)),
    };
  };
  const base = of('inprocess');
  process.stdout.write(
    `\ntransports: ${RUNS} Runs, concurrency ${CONC}, 2 Runtime Pods, ${LAMBDA_ENVS} Lambda execution environments, ` +
      `median of ${ROUNDS} round(s); load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}\n`,
  );
  for (const t of ['inprocess', 'webhook', 'lambda'] as const) {
    const r = of(t);
    process.stdout.write(
      `  ${t.padEnd(9)} complete p50 ${ms(r.p50)}  p95 ${ms(r.p95)}  throughput ${r.tput.toFixed(1)} Runs/s  ` +
        `CPU/Run ${r.cpuPerRun.toFixed(1)} ms  invocations/Run ${r.callsPerRun.toFixed(1)}  ok ${r.ok}/${RUNS}  ` +
        `(p50 ${(r.p50 / base.p50).toFixed(2)}x of inprocess, throughput ${(r.tput / base.tput).toFixed(2)}x); ` +
        `run-ttl/Run ${r.ttlPerRun.toFixed(2)}; seed demo p50 ${ms(r.demoP50)} (${(r.demoP50 / base.demoP50).toFixed(2)}x), ` +
        `CPU/WorkflowRun ${r.demoCpu.toFixed(0)} ms\n`,
    );
  }
}

async function main(): Promise<void> {
  const root = join(REPO_ROOT, '.kruntimes', 'bench', `transports-${process.pid}`);
  const env = await up({
    root,
    nodes: ['bench-a', 'bench-b'],
    ...(process.env.KRT_BIN_DIR ? { binDir: process.env.KRT_BIN_DIR } : {}),
  });
  const rie = await startLambdaRie(LAMBDA_ENVS);
  const api = env.admin;
  try {
    await api.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    await api.create(`/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runtimes`, benchRuntime('bench-bash', 2, 64, {}));
    await burst(api, 'ready', 2);
    if (DEMOS) await demoRuntime(api);
    // One unmeasured burst first: the first burst after the Runtime starts is slower whatever the
    // transport, and would count against the one measured first (inprocess).
    await burst(api, 'warm', RUNS);
    const mine = (cmd: string): boolean => cmd.includes(root) || /aws-lambda-ri[ce]/.test(cmd);
    const rows: Row[] = [];
    for (let round = 0; round < ROUNDS; round++)
      for (const t of ['inprocess', 'webhook', 'lambda'] as const) {
        await use(api, t, rie);
        rows.push(await measure(api, t, round, mine));
        process.stdout.write(`${JSON.stringify({ ...rows[rows.length - 1], load: loadavg()[0] })}\n`);
      }
    report(rows);
  } finally {
    rie.stop();
    api.close();
    if (process.env.BENCH_KEEP !== '1') await down(root, { purge: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
