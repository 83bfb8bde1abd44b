/**
 * Foundation benchmark (not a test): cold build time of the control plane (as recorded by the
 * build), warm `up` time to a ready API server and Ready node, and Pod create-to-Running
 * latency on the node agent, printed next to baselines measured in the same run: the API
 * server's own create latency and a bare process spawn.
 */
import { spawnSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { down, up, buildControlPlane } from '../localenv/environment.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { ms, ratio, summary } from './stats.ts';

const PODS = Number(process.env.BENCH_PODS ?? '30');
const root = join(REPO_ROOT, '.kruntimes', 'bench', String(process.pid));

function buildRecord(binDir: string): string {
  const f = join(binDir, 'build-time.txt');
  if (!existsSync(f)) return 'no build record (binaries were not built by scripts/build-control-plane.sh)';
  const t = readFileSync(f, 'utf8');
  const wall = /wall_seconds=(\d+)/.exec(t)?.[1];
  const rss = /Maximum resident set size \(kbytes\): (\d+)/.exec(t)?.[1];
  return `cold build ${wall ?? '?'} s wall, peak RSS ${rss ? (Number(rss) / 1024 / 1024).toFixed(2) : '?'} GiB`;
}

async function spawnLatency(n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await new Promise<void>((r) => spawn('/bin/true').on('exit', () => r()));
    out.push(performance.now() - t);
  }
  return out;
}

async function main(): Promise<void> {
  const binDir = await buildControlPlane(() => undefined);
  process.stdout.write(
    `control plane: ${buildRecord(binDir)}; binary ${(Number(spawnSync('stat', ['-c', '%s', join(binDir, 'k8s-bin')]).stdout.toString()) / 1e6).toFixed(0)} MB\n`,
  );
  const t0 = performance.now();
  let apiReadyAt = 0;
  const env = await up({
    root,
    binDir,
    nodes: ['bench-node'],
    progress: (m) => {
      if (m.startsWith('starting kube-controller-manager')) apiReadyAt = performance.now();
    },
  });
  const upMs = performance.now() - t0;
  try {
    const api = env.admin;
    await api.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'bench' } });
    for (;;) {
      try {
        await api.get('/api/v1/namespaces/bench/serviceaccounts/default');
        break;
      } catch {
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    const createMs: number[] = [];
    for (let i = 0; i < PODS; i++) {
      const t = performance.now();
      await api.create('/api/v1/namespaces/bench/configmaps', {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: `cm-${i}` },
        data: { i: String(i) },
      });
      createMs.push(performance.now() - t);
    }
    const running: number[] = [];
    for (let i = 0; i < PODS; i++) {
      const name = `p-${i}`;
      const t = performance.now();
      await api.create('/api/v1/namespaces/bench/pods', {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name },
        spec: {
          terminationGracePeriodSeconds: 1,
          containers: [{ name: 'c', image: 'bash', command: ['sleep', '3600'] }],
        },
      });
      for (;;) {
        const p = await api.get<KubeObject & { status?: { phase?: string } }>(`/api/v1/namespaces/bench/pods/${name}`);
        if (p.status?.phase === 'Running') break;
        await new Promise((r) => setTimeout(r, 5));
      }
      running.push(performance.now() - t);
    }
    const spawnMs = await spawnLatency(PODS);
    const c = summary(createMs),
      r = summary(running),
      s = summary(spawnMs);
    process.stdout.write(
      [
        `warm up (binaries cached, fresh state): API server ready ${ms(apiReadyAt - t0)}, node Ready ${ms(upMs)}`,
        `Pod create-to-Running (n=${r.n}, sequential, polled every 5 ms): p50 ${ms(r.p50)}  p95 ${ms(r.p95)}`,
        `  baseline API server create (ConfigMap, n=${c.n}): p50 ${ms(c.p50)}  p95 ${ms(c.p95)}   -> Pod/create ratio p50 ${ratio(r.p50, c.p50)}`,
        `  baseline bare process spawn (/bin/true, n=${s.n}): p50 ${ms(s.p50)}  p95 ${ms(s.p95)}`,
        '',
      ].join('\n'),
    );
  } finally {
    env.admin.close();
    await down(root, { purge: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${String(err)}\n`);
  process.exit(1);
});
