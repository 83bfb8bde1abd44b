/**
 * Runs benchmark (not a test), upstream method (reference §7): N Runs created with a given
 * concurrency on R Runtime Pods with C run slots each, `sleep <s>; echo benchmark-run-<i>`,
 * latencies from Run status timestamps (schedule, dispatch, execution, complete) and throughput.
 * In the same run: the floor (API create + update latency × writes per Run + a bare process
 * spawn of the same command) and a plain batch/v1 Job doing the same work on the same node agent.
 *   npx tsx bench/runs.ts                 # hot path: 50 Runs, concurrency 25, 2 Pods × 64 slots, sleep 0
 *   BENCH_CASE=backlog npx tsx bench/runs.ts   # 50 Runs, concurrency 10, 2 Pods × 4 slots, sleep 500ms
 */
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { down, up, type Env } from '../localenv/environment.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import type { KubeClient } from '../lib/kube/client.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { ListWatch } from '../lib/kube/watch.ts';
import { ms, ratio, summary } from './stats.ts';
import { cpuDelta, cpuTicks, cpuTotalMs } from './cpu.ts';
import { profiled } from './profile.ts';
import { apiCounters, perUnit } from './apiserver-requests.ts';
import { BENCH_NODE_KIND, benchUpOptions } from './node-kind.ts';
import { benchRuntime } from './runtime.ts';

const backlog = process.env.BENCH_CASE === 'backlog';
/** sequential: one Run at a time (create, wait for its end), the pipeline latency without queueing. */
const sequential = process.env.BENCH_CASE === 'sequential';
const RUNS = Number(process.env.BENCH_RUNS ?? '50');
const CONC = Number(process.env.BENCH_CONCURRENCY ?? (backlog ? '10' : '25'));
const PODS = Number(process.env.BENCH_REPLICAS ?? '2');
const SLOTS = Number(process.env.BENCH_CAPACITY ?? (backlog ? '4' : '64'));
const SLEEP = Number(process.env.BENCH_SLEEP ?? (backlog ? '0.5' : '0'));
/** create + bind + terminal; Runs longer than runtimed's claim delay (200 ms) add the claim write. */
const WRITES_PER_RUN = 3;
const NS = 'bench';
type Run = KubeObject & {
  status?: {
    phase?: string;
    startTime?: string;
    completionTime?: string;
    conditions?: { type: string; lastTransitionTime: string }[];
  };
};

async function pool<T>(n: number, conc: number, fn: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: conc }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await fn(i);
      }
    }),
  );
  return out;
}

async function runtimeReady(api: KubeClient): Promise<void> {
  for (;;) {
    const pods = await api.list<KubeObject & { status?: { conditions?: { type: string; status: string }[] } }>(
      `/api/v1/namespaces/${NS}/pods`,
      { labelSelector: 'runtime=bench-bash' },
    );
    const ready = pods.items.filter(
      (p) =>
        p.status?.conditions?.some((c) => c.type === 'kruntimes.io/RuntimedReady' && c.status === 'True') &&
        p.status.conditions.some((c) => c.type === 'Ready' && c.status === 'True'),
    );
    if (ready.length >= PODS) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function measureRuns(api: KubeClient): Promise<void> {
  const created: Record<string, number> = {};
  const done = new Map<string, Run>();
  let resolveAll: () => void = () => undefined;
  const all = new Promise<void>((r) => {
    resolveAll = r;
  });
  const watch = new ListWatch<Run>(
    api,
    { path: `/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runs`, labelSelector: 'kruntimes.io/benchmark=true' },
    (d) => {
      if (['Succeeded', 'Failed', 'Timeout', 'Cancelled'].includes(d.object.status?.phase ?? '')) {
        done.set(d.object.metadata.name ?? '', d.object);
        if (done.size >= RUNS) resolveAll();
      }
    },
  );
  watch.start();
  await watch.synced;
  const t0 = Date.now();
  const createMs = await pool(RUNS, sequential ? 1 : CONC, async (i) => {
    const start = Date.now();
    const name = `bench-${i}`;
    created[name] = start;
    await api.create(`/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runs`, {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'Run',
      metadata: { name, labels: { 'kruntimes.io/benchmark': 'true' } },
      spec: {
        runtime: 'bench-bash',
        mode: { task: { args: [`sleep ${SLEEP.toFixed(3)}; echo benchmark-run-${i}`] } },
        ttlSecondsAfterFinished: 300,
      },
    });
    const took = Date.now() - start;
    while (sequential && !done.has(name)) await new Promise((r) => setTimeout(r, 1));
    return took;
  });
  await all;
  watch.stop();
  const wall = (Math.max(...[...done.values()].map((r) => Date.parse(r.status?.completionTime ?? ''))) - t0) / 1000;
  const lat = (f: (r: Run, c: number) => number): number[] =>
    [...done.values()].map((r) => f(r, created[r.metadata.name ?? ''] ?? 0));
  const sched = summary(
    lat((r, c) => Date.parse(r.status?.conditions?.find((x) => x.type === 'Scheduled')?.lastTransitionTime ?? '') - c),
  );
  const disp = summary(lat((r, c) => Date.parse(r.status?.startTime ?? '') - c));
  const exec = summary(lat((r) => Date.parse(r.status?.completionTime ?? '') - Date.parse(r.status?.startTime ?? '')));
  const comp = summary(lat((r, c) => Date.parse(r.status?.completionTime ?? '') - c));
  const ok = [...done.values()].filter((r) => r.status?.phase === 'Succeeded').length;
  const cr = summary(createMs);
  process.stdout.write(
    [
      `kruntimes Runs: ${RUNS} runs, ${sequential ? 'one at a time' : `concurrency ${CONC}`}, ${PODS} pods x ${SLOTS} slots, sleep ${SLEEP}s`,
      `  schedule  p50 ${ms(sched.p50)}  p95 ${ms(sched.p95)}`,
      `  dispatch  p50 ${ms(disp.p50)}  p95 ${ms(disp.p95)}`,
      `  execution p50 ${ms(exec.p50)}  p95 ${ms(exec.p95)}`,
      `  complete  p50 ${ms(comp.p50)}  p95 ${ms(comp.p95)}`,
      `  create request p50 ${ms(cr.p50)}; succeeded ${ok}/${RUNS}; throughput ${(ok / wall).toFixed(1)} Runs/s (first create -> last completion ${wall.toFixed(2)} s)`,
      '',
    ].join('\n'),
  );
  (globalThis as { benchComplete?: number }).benchComplete = comp.p50;
}

async function floor(api: KubeClient): Promise<number> {
  const creates: number[] = [];
  const updates: number[] = [];
  for (let i = 0; i < 30; i++) {
    let t = performance.now();
    await api.create(`/api/v1/namespaces/${NS}/configmaps`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: `floor-${i}` },
      data: { a: '0' },
    });
    creates.push(performance.now() - t);
    t = performance.now();
    await api.patch(`/api/v1/namespaces/${NS}/configmaps/floor-${i}`, { data: { a: '1' } });
    updates.push(performance.now() - t);
  }
  const runCreates: number[] = [];
  const runUpdates: number[] = [];
  for (let i = 0; i < 30; i++) {
    let t = performance.now();
    await api.create(`/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runs`, {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'Run',
      metadata: { name: `floor-${i}` },
      spec: { runtime: 'no-such-runtime', mode: { task: { args: ['true'] } } },
    });
    runCreates.push(performance.now() - t);
    t = performance.now();
    await api.patch(`/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runs/floor-${i}/status`, {
      status: { phase: 'Pending', message: `floor ${i}` },
    });
    runUpdates.push(performance.now() - t);
  }
  process.stdout.write(
    `  Run objects: create p50 ${ms(summary(runCreates).p50)}, status patch p50 ${ms(summary(runUpdates).p50)} (ConfigMap create/patch p50 ${ms(summary(creates).p50)}/${ms(summary(updates).p50)})\n`,
  );
  const spawns: number[] = [];
  for (let i = 0; i < 30; i++) {
    const t = performance.now();
    await new Promise<void>((r) =>
      spawn('bash', ['-c', `sleep ${SLEEP.toFixed(3)}; echo x`], { stdio: 'ignore' }).on('exit', () => r()),
    );
    spawns.push(performance.now() - t);
  }
  const c = summary(runCreates).p50,
    u = summary(runUpdates).p50,
    s = summary(spawns).p50;
  const f = c + (WRITES_PER_RUN - 1) * u + s;
  process.stdout.write(
    `floor: API Run create p50 ${ms(c)} + ${WRITES_PER_RUN - 1} x Run status update p50 ${ms(u)} + bare spawn p50 ${ms(s)} = ${ms(f)} (writes per Run: ${WRITES_PER_RUN})\n`,
  );
  return f;
}

async function jobs(api: KubeClient, n: number): Promise<void> {
  const lat = await pool(n, Math.min(CONC, 10), async (i) => {
    const t = Date.now();
    await api.create(`/apis/batch/v1/namespaces/${NS}/jobs`, {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name: `job-${i}` },
      spec: {
        backoffLimit: 0,
        template: {
          spec: {
            restartPolicy: 'Never',
            containers: [
              {
                name: 'c',
                image: 'bash',
                // A real kubelet pulls an untagged image by default: the kubelet kind imports it locally.
                imagePullPolicy: 'IfNotPresent',
                command: ['bash', '-c', `sleep ${SLEEP.toFixed(3)}; echo benchmark-job-${i}`],
              },
            ],
          },
        },
      },
    });
    for (;;) {
      const j = await api.get<KubeObject & { status?: { conditions?: { type: string; status: string }[] } }>(
        `/apis/batch/v1/namespaces/${NS}/jobs/job-${i}`,
      );
      if (j.status?.conditions?.some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True'))
        return Date.now() - t;
      await new Promise((r) => setTimeout(r, 10));
    }
  });
  const s = summary(lat);
  process.stdout.write(
    `plain batch/v1 Job, same work, same node agent (n=${n}, concurrency ${Math.min(CONC, 10)}): complete p50 ${ms(s.p50)}  p95 ${ms(s.p95)}\n`,
  );
  (globalThis as { benchJob?: number }).benchJob = s.p50;
}

async function setup(env: Env): Promise<void> {
  const api = env.admin;
  await api.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
  const t0 = performance.now();
  await api.create(
    `/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runtimes`,
    benchRuntime('bench-bash', PODS, SLOTS, { 'kruntimes.io/benchmark': 'true' }),
  );
  await runtimeReady(api);
  process.stdout.write(
    `Runtime (${PODS} Pods) created → Pods ready: ${(performance.now() - t0).toFixed(0)} ms (first Runtime)\n`,
  );
}

async function main(): Promise<void> {
  const root = join(REPO_ROOT, '.kruntimes', 'bench', `runs-${process.pid}`);
  const env = await up({ root, ...benchUpOptions(['bench-a', 'bench-b']) });
  process.stdout.write(`node kind: ${BENCH_NODE_KIND} (${env.state.nodes.length} node(s))\n`);
  try {
    await setup(env);
    // This environment only: its control plane and node agents name `root`; Pods descend from its node agents.
    const mine = (cmd: string): boolean => cmd.includes(root);
    const before = cpuTicks(mine);
    const apiBefore = await apiCounters(env.admin);
    await profiled(mine, 'the Runs phase', () => measureRuns(env.admin));
    const after = cpuTicks(mine);
    const apiAfter = await apiCounters(env.admin);
    process.stdout.write(`  CPU during the Runs phase: ${cpuDelta(before, after)}\n`);
    process.stdout.write(
      `  kube-apiserver per Run (requests of every client; watch events sent): ${perUnit(apiBefore, apiAfter, RUNS)}\n`,
    );
    // A burst of N Runs on C cores cannot complete its median Run before (N/2) x CPU-per-Run / C,
    // however well it is scheduled: the CPU the median Run and those before it need must be spent first.
    const perRun = cpuTotalMs(before, after) / RUNS;
    const cores = availableParallelism();
    if (!backlog && !sequential)
      process.stdout.write(
        `  CPU per Run ${perRun.toFixed(1)} ms on ${cores} cores: throughput bound ${((cores * 1000) / perRun).toFixed(0)} Runs/s; a ${RUNS}-Run burst's p50 complete cannot be below ${(((RUNS / 2) * perRun) / cores).toFixed(0)} ms at this CPU cost (p50 <= 100 ms needs <= ${((100 * cores) / (RUNS / 2)).toFixed(1)} ms of CPU per Run)\n`,
      );
    const f = await floor(env.admin);
    await jobs(env.admin, Number(process.env.BENCH_JOBS ?? '20'));
    const g = globalThis as { benchComplete?: number; benchJob?: number };
    process.stdout.write(
      `ratios: Run complete p50 / floor ${ratio(g.benchComplete ?? NaN, f)}; plain Job / Run complete p50 ${ratio(g.benchJob ?? NaN, g.benchComplete ?? NaN)}\n`,
    );
  } finally {
    env.admin.close();
    if (process.env.BENCH_KEEP !== '1') await down(root, { purge: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
