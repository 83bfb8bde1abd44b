/**
 * Sessions benchmark (not a test): one operation on a Ready session Run through the aggregated
 * API (kube-apiserver -> extension server -> pinned TLS to runtimed -> Runtime Server), measured
 * as connect (WebSocket open), first output, and exit status; next to, in the same run, the same
 * command as a one-shot task Run (create -> Succeeded, one at a time) and a bare local spawn.
 *   npx tsx bench/sessions.ts            # 30 operations `echo hi`, sequential
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { down, up } from '../localenv/environment.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import type { KubeClient } from '../lib/kube/client.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { PROTOCOL } from '../lib/session/channel.ts';
import { ms, ratio, summary } from './stats.ts';
import { benchRuntime } from './runtime.ts';

const N = Number(process.env.BENCH_OPS ?? '30');
const NS = 'bench';
type Run = KubeObject & { status?: { phase?: string; conditions?: { type: string; status: string }[] } };

async function until<T>(f: () => Promise<T | undefined>): Promise<T> {
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function setup(api: KubeClient): Promise<void> {
  await api.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
  await api.create(`/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runtimes`, benchRuntime('bash', 1, 8));
  await api.create(`/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runs`, {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'Run',
    metadata: { name: 'shell' },
    spec: { runtime: 'bash', mode: { session: {} } },
  });
  await until(async () =>
    (await api.get<Run>(`/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runs/shell`)).status?.phase === 'Ready'
      ? true
      : undefined,
  );
  await until(async () => {
    const s = await api.get<KubeObject & { status?: { conditions?: { type: string; status: string }[] } }>(
      '/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.sessions.kruntimes.io',
    );
    return s.status?.conditions?.some((c) => c.type === 'Available' && c.status === 'True') ? true : undefined;
  });
}

async function operation(api: KubeClient): Promise<{ open: number; first: number; exit: number }> {
  const t = performance.now();
  const ws = await api.websocket(
    `/apis/sessions.kruntimes.io/v1alpha1/namespaces/${NS}/runs/shell/session`,
    [PROTOCOL],
    [
      ['command', 'echo'],
      ['command', 'hi'],
    ],
  );
  const open = performance.now() - t;
  let first = NaN;
  await new Promise<void>((resolve) => {
    ws.on('message', (m: Buffer) => {
      if (m[0] === 1 && Number.isNaN(first)) first = performance.now() - t;
    });
    ws.on('close', () => resolve());
  });
  return { open, first, exit: performance.now() - t };
}

async function taskRun(api: KubeClient, i: number): Promise<number> {
  const t = performance.now();
  await api.create(`/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runs`, {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'Run',
    metadata: { name: `task-${i}` },
    spec: { runtime: 'bash', mode: { task: { args: ['echo hi'] } } },
  });
  await until(async () =>
    ['Succeeded', 'Failed'].includes(
      (await api.get<Run>(`/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runs/task-${i}`)).status?.phase ?? '',
    )
      ? true
      : undefined,
  );
  return performance.now() - t;
}

async function main(): Promise<void> {
  const root = join(REPO_ROOT, '.kruntimes', 'bench', `sessions-${process.pid}`);
  const env = await up({ root, ...(process.env.KRT_BIN_DIR ? { binDir: process.env.KRT_BIN_DIR } : {}) });
  try {
    await setup(env.admin);
    await operation(env.admin); // warm the token, the pinned connection path and the Runtime Server
    const ops: { open: number; first: number; exit: number }[] = [];
    for (let i = 0; i < N; i++) ops.push(await operation(env.admin));
    const runs: number[] = [];
    for (let i = 0; i < N; i++) runs.push(await taskRun(env.admin, i));
    const spawns: number[] = [];
    for (let i = 0; i < N; i++) {
      const t = performance.now();
      await new Promise<void>((r) => spawn('echo', ['hi'], { stdio: 'ignore' }).on('exit', () => r()));
      spawns.push(performance.now() - t);
    }
    const o = summary(ops.map((x) => x.open)),
      f = summary(ops.map((x) => x.first)),
      e = summary(ops.map((x) => x.exit)),
      r = summary(runs),
      s = summary(spawns);
    process.stdout.write(
      [
        `kruntimes sessions: ${N} operations \`echo hi\` on one Ready session Run, one at a time`,
        `  connect (WebSocket open through aggregation)  p50 ${ms(o.p50)}  p99 ${ms(o.p99)}`,
        `  first output                                  p50 ${ms(f.p50)}  p99 ${ms(f.p99)}`,
        `  exit status received                          p50 ${ms(e.p50)}  p99 ${ms(e.p99)}`,
        `baseline: the same command as a task Run (create -> Succeeded, client-observed)  p50 ${ms(r.p50)}  p99 ${ms(r.p99)}`,
        `baseline: bare local spawn of echo                                               p50 ${ms(s.p50)}`,
        `ratios: session operation / task Run p50 ${ratio(e.p50, r.p50)}; session operation / bare spawn p50 ${ratio(e.p50, s.p50)}`,
        '',
      ].join('\n'),
    );
  } finally {
    env.admin.close();
    if (process.env.BENCH_KEEP !== '1') await down(root, { purge: true });
  }
}

await main();
