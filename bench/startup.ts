/**
 * Start-up benchmark (not a test): what a Runtime Pod's components cost to start, from the
 * JavaScript bundle (dist/, localenv/bundle.ts) next to TypeScript through tsx, in the same run.
 *   1. The Runtime Server alone, started until it listens: CPU and peak RSS, interleaved, N times.
 *   2. The extension server's functions: `kruntimes fn list` loads every function as the
 *      extension server does at start; CPU and peak RSS until it exits, interleaved, N times.
 *   3. On a local environment: a Runtime of 2 Pods created → Pods ready (RuntimedReady and Ready)
 *      and the CPU its Pods spent, once from the bundle, once with the bundle moved aside (the
 *      images' entrypoint then falls back to tsx), alternating, N rounds.
 *   npx tsx bench/startup.ts          # BENCH_ROUNDS=3 by default
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { down, up, type Env } from '../localenv/environment.ts';
import { BUNDLE_DIR } from '../localenv/bundle.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { cpuTicks, cpuTotalMs } from './cpu.ts';
import { BENCH_NODE_KIND, benchUpOptions } from './node-kind.ts';
import { benchRuntime } from './runtime.ts';
import { ratio, summary } from './stats.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? '3');
const NS = 'bench-startup';
type Variant = 'bundle' | 'tsx';
// On a real kubelet the images carry their own copy of the bundle: moving the checkout's aside
// changes nothing there, so only the bundle is measured.
const VARIANTS: Variant[] = BENCH_NODE_KIND === 'kubelet' ? ['bundle'] : ['bundle', 'tsx'];

/** CPU ms (utime + stime, all threads) and peak RSS (KiB) of a live process. */
function usage(pid: number): { cpuMs: number; rssKiB: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const hwm = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return { cpuMs: (Number(f[11]) + Number(f[12])) * 10, rssKiB: Number(hwm ?? NaN) };
}

/** Starts the Runtime Server one way, waits until it listens, samples it, stops it. */
function runtimeServerOnce(v: Variant): Promise<{ cpuMs: number; rssKiB: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'krt-startup-'));
  const args =
    v === 'bundle' ? [join(BUNDLE_DIR, 'kruntimes.mjs')] : ['--import', 'tsx', join(REPO_ROOT, 'cmd', 'kruntimes.ts')];
  const child = spawn(process.execPath, [...args, 'runtime-server', '--language', 'bash'], {
    cwd: REPO_ROOT,
    env: { ...process.env, KRT_RUNTIME_SOCKET: join(dir, 'runtime.sock') },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  return new Promise((resolve, reject) => {
    let err = '';
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
      if (!err.includes('runtime server listening')) return;
      const u = usage(child.pid ?? 0);
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      resolve(u);
    });
    child.on('exit', (code) => {
      if (!err.includes('runtime server listening')) reject(new Error(`runtime-server (${v}) exited ${code}: ${err}`));
    });
  });
}

async function runtimeServerCase(): Promise<void> {
  const got: Record<Variant, { cpu: number[]; rss: number[] }> = {
    bundle: { cpu: [], rss: [] },
    tsx: { cpu: [], rss: [] },
  };
  for (let i = 0; i < ROUNDS * 2; i++) {
    for (const v of VARIANTS) {
      const u = await runtimeServerOnce(v);
      got[v].cpu.push(u.cpuMs);
      got[v].rss.push(u.rssKiB / 1024);
    }
  }
  const p50 = (v: Variant, k: 'cpu' | 'rss'): number => summary(got[v][k]).p50;
  process.stdout.write(
    `Runtime Server start → listening (p50 of ${ROUNDS * 2}): CPU bundle ${p50('bundle', 'cpu')} ms vs tsx ${p50('tsx', 'cpu')} ms (${ratio(p50('bundle', 'cpu'), p50('tsx', 'cpu'))}); ` +
      `peak RSS bundle ${p50('bundle', 'rss').toFixed(0)} MiB vs tsx ${p50('tsx', 'rss').toFixed(0)} MiB (${ratio(p50('bundle', 'rss'), p50('tsx', 'rss'))})\n`,
  );
}

/** Loaded with --import: prints the process's CPU (µs) and peak RSS (KiB) as it exits. */
const EXIT_USAGE = `process.on('exit', () => {
  const r = process.resourceUsage();
  process.stderr.write('USAGE ' + (r.userCPUTime + r.systemCPUTime) + ' ' + r.maxRSS + '\\n');
});`;

/** `kruntimes fn list` one way: CPU ms and peak RSS MiB of the whole process. */
function functionsOnce(v: Variant): { cpuMs: number; rssMiB: number } {
  const usage = ['--import', `data:text/javascript,${encodeURIComponent(EXIT_USAGE)}`];
  const entry =
    v === 'bundle' ? [join(BUNDLE_DIR, 'kruntimes.mjs')] : ['--import', 'tsx', join(REPO_ROOT, 'cmd', 'kruntimes.ts')];
  const r = spawnSync(process.execPath, [...usage, ...entry, 'fn', 'list'], { encoding: 'utf8', cwd: REPO_ROOT });
  const m = /USAGE (\d+) (\d+)/.exec(r.stderr);
  if (r.status !== 0 || !m) throw new Error(`fn list (${v}) exited ${r.status}: ${r.stderr}`);
  return { cpuMs: Number(m[1]) / 1000, rssMiB: Number(m[2]) / 1024 };
}

function functionsCase(): void {
  const got: Record<Variant, { cpu: number[]; rss: number[] }> = {
    bundle: { cpu: [], rss: [] },
    tsx: { cpu: [], rss: [] },
  };
  for (let i = 0; i < ROUNDS * 2; i++) {
    for (const v of VARIANTS) {
      const u = functionsOnce(v);
      got[v].cpu.push(u.cpuMs);
      got[v].rss.push(u.rssMiB);
    }
  }
  const p50 = (v: Variant, k: 'cpu' | 'rss'): number => Math.round(summary(got[v][k]).p50);
  process.stdout.write(
    `Extension server functions loaded (fn list, p50 of ${ROUNDS * 2}): CPU bundle ${p50('bundle', 'cpu')} ms vs tsx ${p50('tsx', 'cpu')} ms (${ratio(p50('bundle', 'cpu'), p50('tsx', 'cpu'))}); ` +
      `peak RSS bundle ${p50('bundle', 'rss')} MiB vs tsx ${p50('tsx', 'rss')} MiB (${ratio(p50('bundle', 'rss'), p50('tsx', 'rss'))})\n`,
  );
}

type Pod = KubeObject & { status?: { conditions?: { type: string; status: string }[] } };

async function podsReady(env: Env, name: string): Promise<void> {
  for (;;) {
    const pods = await env.admin.list<Pod>(`/api/v1/namespaces/${NS}/pods`, { labelSelector: `runtime=${name}` });
    const ready = pods.items.filter((p) =>
      ['kruntimes.io/RuntimedReady', 'Ready'].every((t) =>
        p.status?.conditions?.some((c) => c.type === t && c.status === 'True'),
      ),
    );
    if (ready.length >= 2) return;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The node agent deletes a Pod object only after its processes have ended. */
async function podsGone(env: Env, name: string): Promise<void> {
  for (;;) {
    const pods = await env.admin.list<Pod>(`/api/v1/namespaces/${NS}/pods`, { labelSelector: `runtime=${name}` });
    if (pods.items.length === 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** One Runtime created → its 2 Pods ready; the CPU its runtimed and Runtime Servers spent. */
async function runtimeOnce(env: Env, root: string, name: string): Promise<{ ms: number; cpuMs: number }> {
  const mine = (cmd: string): boolean => cmd.includes(root);
  const before = cpuTicks(mine);
  const t0 = performance.now();
  await env.admin.create(`/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runtimes`, benchRuntime(name, 2, 4));
  await podsReady(env, name);
  const ms = performance.now() - t0;
  const after = cpuTicks(mine);
  const only = (m: Map<string, number>): Map<string, number> =>
    new Map([...m].filter(([k]) => k === 'runtimed' || k === 'runtime-server'));
  await env.admin.delete(`/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runtimes/${name}`);
  // The next sample must not see these processes end (their CPU would cancel the next Runtime's).
  await podsGone(env, name);
  return { ms, cpuMs: cpuTotalMs(only(before), only(after)) };
}

/** The tsx variant moves the bundle aside, so the images' entrypoint falls back to tsx. */
async function variantOnce(env: Env, root: string, v: Variant, name: string): Promise<{ ms: number; cpuMs: number }> {
  const aside = `${BUNDLE_DIR}.bench-aside`;
  if (v === 'tsx') renameSync(BUNDLE_DIR, aside);
  try {
    return await runtimeOnce(env, root, name);
  } finally {
    if (existsSync(aside)) renameSync(aside, BUNDLE_DIR);
  }
}

async function runtimeCase(): Promise<void> {
  const root = join(REPO_ROOT, '.kruntimes', 'bench', `startup-${process.pid}`);
  const env = await up({ root, ...benchUpOptions(['bench-a']) });
  const got: Record<Variant, { ms: number[]; cpu: number[] }> = {
    bundle: { ms: [], cpu: [] },
    tsx: { ms: [], cpu: [] },
  };
  try {
    await env.admin.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    for (let i = 0; i < ROUNDS; i++) {
      for (const v of VARIANTS) {
        const r = await variantOnce(env, root, v, `rt-${v}-${i}`);
        got[v].ms.push(r.ms);
        got[v].cpu.push(r.cpuMs);
      }
    }
  } finally {
    env.admin.close();
    await down(root, { purge: true });
  }
  const p50 = (v: Variant, k: 'ms' | 'cpu'): number => summary(got[v][k]).p50;
  process.stdout.write(
    `Runtime (2 Pods) created → Pods ready (p50 of ${ROUNDS}): bundle ${p50('bundle', 'ms').toFixed(0)} ms vs tsx ${p50('tsx', 'ms').toFixed(0)} ms (${ratio(p50('bundle', 'ms'), p50('tsx', 'ms'))}); ` +
      `CPU of runtimed + Runtime Servers bundle ${p50('bundle', 'cpu')} ms vs tsx ${p50('tsx', 'cpu')} ms (${ratio(p50('bundle', 'cpu'), p50('tsx', 'cpu'))})\n`,
  );
}

async function main(): Promise<void> {
  if (BENCH_NODE_KIND === 'kubelet')
    process.stdout.write('node kind: kubelet (the Runtime Server case runs on the host either way)\n');
  else {
    await runtimeServerCase();
    functionsCase();
  }
  if (process.env.BENCH_CLUSTER !== '0') await runtimeCase();
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
