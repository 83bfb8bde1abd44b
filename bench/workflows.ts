/**
 * Workflow benchmark (not a test): the seed demo's trigger-to-Succeeded time and the gap between
 * consecutive steps of a job (previous Run's completionTime -> next Run's startTime), p50/p95
 * over 20 WorkflowRuns; the admission webhook's cost (Run create with a workspace reference,
 * which goes through the SubjectAccessReview, versus the same create without one); and, in the
 * same run, the API floor (Run create + status update latency).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { renderRun } from '../cli/wf/commands.ts';
import { down, up } from '../localenv/environment.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import type { KubeClient } from '../lib/kube/client.ts';
import { ListWatch } from '../lib/kube/watch.ts';
import { apiCounters, perUnit } from './apiserver-requests.ts';
import { cpuDelta, cpuTicks, cpuTotalMs } from './cpu.ts';
import { profiled } from './profile.ts';
import { ms, summary } from './stats.ts';

const N = Number(process.env.BENCH_WORKFLOWS ?? '20');
const NS = 'bench';
const G = `/apis/kruntimes.io/v1alpha1/namespaces/${NS}`;
type Step = { runName?: string };
type Wfr = KubeObject & { status?: { phase?: string; jobs?: Record<string, { steps?: Step[] }> } };
type Run = KubeObject & {
  status?: { startTime?: string; completionTime?: string; assignedPod?: string; phase?: string };
};

/** When the bench saw each Run's transitions (Date.now(), comparable with runtimed's stamps on one machine). */
interface Seen {
  added?: number;
  scheduled?: number;
  running?: number;
  terminal?: number;
}

/** Watches the namespace's Runs and records when each was first seen created, Scheduled, Running and terminal. */
function timeline(api: KubeClient): { seen: Map<string, Seen>; lw: ListWatch<Run> } {
  const seen = new Map<string, Seen>();
  const lw = new ListWatch<Run>(api, { path: `${G}/runs` }, (d) => {
    const now = Date.now();
    const s = seen.get(d.object.metadata.name ?? '') ?? {};
    seen.set(d.object.metadata.name ?? '', s);
    const st = d.object.status ?? {};
    s.added ??= now;
    if (st.assignedPod) s.scheduled ??= now;
    if (st.phase === 'Running') s.running ??= now;
    if (['Succeeded', 'Failed'].includes(st.phase ?? '')) s.terminal ??= now;
  });
  return { seen, lw };
}

const HOPS = [
  'prev completionTime -> prev terminal seen',
  'prev terminal seen -> next Run created (seen)',
  'next created -> next Scheduled (seen)',
  'next Scheduled seen -> next startTime',
  'next startTime -> next Running seen',
] as const;

const PARTS = [
  'trigger -> first Run created (seen)',
  'first Run created (seen) -> its startTime',
  'Runs executing (sum of startTime -> completionTime)',
  'step boundaries in build (sum of 2 gaps)',
  'job boundary (build done -> deploy started)',
  'last Run done -> WorkflowRun Succeeded seen',
] as const;

/** Where one trigger -> Succeeded goes, in ms (the parts add up to the total). */
function parts(t0: number, tDone: number, build: Run[], deploy: Run[], seen: Map<string, Seen>): number[] {
  const start = (r: Run | undefined): number => Date.parse(r?.status?.startTime ?? '');
  const end = (r: Run | undefined): number => Date.parse(r?.status?.completionTime ?? '');
  const first = seen.get(build[0]?.metadata.name ?? '')?.added ?? NaN;
  const all = [...build, ...deploy];
  return [
    first - t0,
    start(build[0]) - first,
    all.reduce((n, r) => n + end(r) - start(r), 0),
    build.slice(1).reduce((n, r, k) => n + start(r) - end(build[k]), 0),
    start(deploy[0]) - end(build[build.length - 1]),
    tDone - end(deploy[deploy.length - 1]),
  ];
}

/** The hops of one step boundary, in ms, from the stamps and the bench's own observations. */
function hops(prev: Run, next: Run, seen: Map<string, Seen>): number[] {
  const p = seen.get(prev.metadata.name ?? '') ?? {};
  const n = seen.get(next.metadata.name ?? '') ?? {};
  const done = Date.parse(prev.status?.completionTime ?? '');
  const start = Date.parse(next.status?.startTime ?? '');
  return [
    (p.terminal ?? NaN) - done,
    (n.added ?? NaN) - (p.terminal ?? NaN),
    (n.scheduled ?? NaN) - (n.added ?? NaN),
    start - (n.scheduled ?? NaN),
    (n.running ?? NaN) - start,
  ];
}

/** Waits for the WorkflowRun's end through a watch (no polling load on the API server). */
function finished(api: KubeClient, name: string): Promise<Wfr> {
  return new Promise((resolve) => {
    const lw: ListWatch<Wfr> = new ListWatch<Wfr>(
      api,
      { path: `${G}/workflowruns`, fieldSelector: `metadata.name=${name}` },
      (d) => {
        if (['Succeeded', 'Failed', 'Cancelled'].includes(d.object.status?.phase ?? '')) {
          lw.stop();
          resolve(d.object);
        }
      },
    );
    lw.start();
  });
}

async function main(): Promise<void> {
  const root = join(REPO_ROOT, '.kruntimes', 'bench', `wf-${process.pid}`);
  const env = await up({
    root,
    nodes: ['bench-a'],
    ...(process.env.KRT_BIN_DIR ? { binDir: process.env.KRT_BIN_DIR } : {}),
  });
  const api = env.admin;
  try {
    await api.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    for (const doc of parseAllDocuments(
      readFileSync(join(REPO_ROOT, 'examples/workflows/runtime-bash.yaml'), 'utf8'),
    ).map((d) => d.toJSON() as KubeObject & { kind: string })) {
      await api.create(
        doc.kind === 'Runtime' ? `${G}/runtimes` : `/api/v1/namespaces/${NS}/persistentvolumeclaims`,
        doc,
      );
    }
    for (;;) {
      const rt = await api.get<KubeObject & { status?: { readyReplicas?: number } }>(`${G}/runtimes/bash`);
      if ((rt.status?.readyReplicas ?? 0) > 0) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    await new Promise((r) => setTimeout(r, 1000));
    const wf = parse(
      readFileSync(join(REPO_ROOT, 'examples/workflows/ci-data-sharing-demo.yaml'), 'utf8'),
    ) as KubeObject;
    const totals: number[] = [];
    const gaps: number[] = [];
    const hopRows: number[][] = HOPS.map(() => []);
    const partRows: number[][] = PARTS.map(() => []);
    const tl = timeline(api);
    tl.lw.start();
    await tl.lw.synced;
    // This environment only: its control plane and node agents name `root`; Pods descend from its node agents.
    const mine = (cmd: string): boolean => cmd.includes(root);
    const cpuBefore = cpuTicks(mine);
    const apiBefore = await apiCounters(api);
    await profiled(mine, 'the WorkflowRuns', async () => {
      for (let i = 0; i < N; i++) {
        const t0 = Date.now();
        const w = await api.create<Wfr>(`${G}/workflowruns`, renderRun(wf as never, {}, `demo-${i}`));
        const done = await finished(api, w.metadata.name ?? '');
        if (done.status?.phase !== 'Succeeded') throw new Error(`demo-${i} ${done.status?.phase}`);
        const tDone = Date.now();
        totals.push(tDone - t0);
        const read = (job: string): Promise<Run[]> =>
          Promise.all((done.status?.jobs?.[job]?.steps ?? []).map((s) => api.get<Run>(`${G}/runs/${s.runName}`)));
        const runs = await read('build');
        parts(t0, tDone, runs, await read('deploy'), tl.seen).forEach((v, h) => partRows[h]!.push(v));
        for (let k = 1; k < runs.length; k++) {
          gaps.push(
            Date.parse(runs[k]!.status?.startTime ?? '') - Date.parse(runs[k - 1]!.status?.completionTime ?? ''),
          );
          hops(runs[k - 1]!, runs[k]!, tl.seen).forEach((v, h) => hopRows[h]!.push(v));
        }
      }
    });
    const cpuAfter = cpuTicks(mine);
    const cpu = cpuDelta(cpuBefore, cpuAfter);
    const cpuPerWfr = (cpuTotalMs(cpuBefore, cpuAfter) / N).toFixed(1);
    const apiPerWfr = perUnit(apiBefore, await apiCounters(api), N);
    tl.lw.stop();
    await api.create(`${G}/persistentworkspaces`, {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'PersistentWorkspace',
      metadata: { name: 'ws' },
      spec: { runtime: 'none' },
    });
    const withWs: number[] = [];
    const without: number[] = [];
    const upd: number[] = [];
    for (let i = 0; i < 100; i++) {
      let t = performance.now();
      await api.create(`${G}/runs`, {
        apiVersion: 'kruntimes.io/v1alpha1',
        kind: 'Run',
        metadata: { name: `hook-${i}` },
        spec: { runtime: 'none', workspace: { name: 'ws' }, source: { inline: 'true' } },
      });
      withWs.push(performance.now() - t);
      t = performance.now();
      await api.create(`${G}/runs`, {
        apiVersion: 'kruntimes.io/v1alpha1',
        kind: 'Run',
        metadata: { name: `plain-${i}` },
        spec: { runtime: 'none', source: { inline: 'true' } },
      });
      without.push(performance.now() - t);
      t = performance.now();
      await api.patch(`${G}/runs/plain-${i}/status`, { status: { phase: 'Pending', message: 'floor' } });
      upd.push(performance.now() - t);
    }
    const tt = summary(totals),
      g = summary(gaps),
      a = summary(withWs),
      b = summary(without),
      u = summary(upd);
    process.stdout.write(
      [
        `ci-data-sharing-demo, ${N} WorkflowRuns one after the other (4 Runs, 2 jobs, 1 artifact each):`,
        `  trigger -> Succeeded  p50 ${ms(tt.p50)}  p95 ${ms(tt.p95)}`,
        '  where trigger -> Succeeded goes (p50 per part; the parts of one run add up to its total):',
        ...PARTS.map((h, i) => `    ${h.padEnd(52)} p50 ${ms(summary(partRows[i]!).p50)}`),
        `  step-to-step gap (previous Run completion -> next Run start, build job) p50 ${ms(g.p50)}  p95 ${ms(g.p95)} (n=${g.n})`,
        '  where a step boundary goes (bench watch on Runs; p50 / p95 per hop):',
        ...HOPS.map((h, i) => {
          const x = summary(hopRows[i]!);
          return `    ${h.padEnd(46)} p50 ${ms(x.p50)}  p95 ${ms(x.p95)}`;
        }),
        `admission: Run create with spec.workspace (webhook + SubjectAccessReview) p50 ${ms(a.p50)} p99 ${ms(a.p99)}; without (no webhook call) p50 ${ms(b.p50)} p99 ${ms(b.p99)} -> webhook adds p50 ${ms(a.p50 - b.p50)}`,
        `floor: Run create p50 ${ms(b.p50)}, Run status update p50 ${ms(u.p50)}; a step boundary needs 3 writes (WorkflowRun status, next Run create, its bind) ~ ${ms(u.p50 + b.p50 + u.p50)}`,
        `CPU during the WorkflowRuns: ${cpu}; all of it ${cpuPerWfr} ms per WorkflowRun`,
        `kube-apiserver per WorkflowRun (requests of every client; watch events sent): ${apiPerWfr}`,
        '',
      ].join('\n'),
    );
  } finally {
    api.close();
    await down(root, { purge: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
