/**
 * Start-up benchmark (not a test): what a Runtime Pod's components cost to start, from the
 * JavaScript bundle (dist/, localenv/bundle.ts) next to TypeScript through tsx, in the same run.
 *   1. The Runtime Server alone, started until it listens: CPU and peak RSS, interleaved, N times.
 *   2. The extension server's functions: `kruntimes fn list` loads every function as the
 *      extension server does at start; CPU and peak RSS until it exits, interleaved, N times.
 *   3. On a local environment: a Runtime of 2 Pods created → Pods ready (RuntimedReady and Ready)
 *      and the CPU its Pods spent, once from the bundle, once with the bundle moved aside (the
 *      images' entrypoint then falls back to tsx), alternating, N rounds.
 *      With BENCH_BASE_DIST=<a dist/ built from another commit> the second variant is that bundle
 *      instead of tsx (before/after side by side): each round also prints when the first Pod reached
 *      each step (created, bound, runtimed running, RuntimedReady, Ready), where its start went by the
 *      node agent's and runtimed's own logs and, 3 s after its Pods were ready, the RSS of their
 *      runtimed and Runtime Server processes.
 *   npx tsx bench/startup.ts          # BENCH_ROUNDS=3 by default; BENCH_LOCAL=0 skips cases 1 and 2
 */
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { down, up, type Env } from '../localenv/environment.ts';
import { BUNDLE_DIR } from '../localenv/bundle.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { cpuPids, cpuTicks, cpuTotalMs } from './cpu.ts';
import { BENCH_NODE_KIND, benchUpOptions } from './node-kind.ts';
import { benchRuntime } from './runtime.ts';
import { ratio, summary } from './stats.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? '3');
const NS = 'bench-startup';
type Variant = 'bundle' | 'tsx' | 'base';
const BASE_DIST = process.env.BENCH_BASE_DIST ?? '';
// On a real kubelet the images carry their own copy of the bundle: moving the checkout's aside
// changes nothing there, so only the bundle is measured.
const VARIANTS: Variant[] = BENCH_NODE_KIND === 'kubelet' ? ['bundle'] : ['bundle', BASE_DIST ? 'base' : 'tsx'];
/** What the bundle is compared with in the local cases. */
const B: Variant = BASE_DIST ? 'base' : 'tsx';

/** node's arguments that start kruntimes one way. */
function entryArgs(v: Variant): string[] {
  if (v === 'bundle') return [join(BUNDLE_DIR, 'kruntimes.mjs')];
  if (v === 'base') return [join(BASE_DIST, 'kruntimes.mjs')];
  return ['--import', 'tsx', join(REPO_ROOT, 'cmd', 'kruntimes.ts')];
}

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
  const args = entryArgs(v);
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
    base: { cpu: [], rss: [] },
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
    `Runtime Server start → listening (p50 of ${ROUNDS * 2}): CPU bundle ${p50('bundle', 'cpu')} ms vs ${B} ${p50(B, 'cpu')} ms (${ratio(p50('bundle', 'cpu'), p50(B, 'cpu'))}); ` +
      `peak RSS bundle ${p50('bundle', 'rss').toFixed(0)} MiB vs ${B} ${p50(B, 'rss').toFixed(0)} MiB (${ratio(p50('bundle', 'rss'), p50(B, 'rss'))})\n`,
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
  const entry = entryArgs(v);
  const r = spawnSync(process.execPath, [...usage, ...entry, 'fn', 'list'], { encoding: 'utf8', cwd: REPO_ROOT });
  const m = /USAGE (\d+) (\d+)/.exec(r.stderr);
  if (r.status !== 0 || !m) throw new Error(`fn list (${v}) exited ${r.status}: ${r.stderr}`);
  return { cpuMs: Number(m[1]) / 1000, rssMiB: Number(m[2]) / 1024 };
}

function functionsCase(): void {
  const got: Record<Variant, { cpu: number[]; rss: number[] }> = {
    bundle: { cpu: [], rss: [] },
    tsx: { cpu: [], rss: [] },
    base: { cpu: [], rss: [] },
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
    `Extension server functions loaded (fn list, p50 of ${ROUNDS * 2}): CPU bundle ${p50('bundle', 'cpu')} ms vs ${B} ${p50(B, 'cpu')} ms (${ratio(p50('bundle', 'cpu'), p50(B, 'cpu'))}); ` +
      `peak RSS bundle ${p50('bundle', 'rss')} MiB vs ${B} ${p50(B, 'rss')} MiB (${ratio(p50('bundle', 'rss'), p50(B, 'rss'))})\n`,
  );
}

type Pod = KubeObject & {
  spec?: { nodeName?: string };
  status?: {
    conditions?: { type: string; status: string }[];
    containerStatuses?: { name: string; state?: { running?: unknown } }[];
  };
};

/** The steps of a Runtime Pod's start, in order, as this benchmark first observes them (25 ms polls). */
const STEPS = ['created', 'bound', 'runtimed running', 'RuntimedReady', 'Ready', 'both'] as const;
type Step = (typeof STEPS)[number];

function stepsOf(p: Pod): Step[] {
  const cond = (t: string): boolean => !!p.status?.conditions?.some((c) => c.type === t && c.status === 'True');
  const running = !!p.status?.containerStatuses?.some((c) => c.name === 'runtimed' && c.state?.running);
  const got: [Step, boolean][] = [
    ['created', true],
    ['bound', !!p.spec?.nodeName],
    ['runtimed running', running],
    ['RuntimedReady', cond('kruntimes.io/RuntimedReady')],
    ['Ready', cond('Ready')],
    ['both', cond('kruntimes.io/RuntimedReady') && cond('Ready')],
  ];
  return got.filter(([, ok]) => ok).map(([s]) => s);
}

/** Waits until 2 Pods are ready; returns, per Pod, when (ms after t0) each step was first seen. */
async function podsReady(env: Env, name: string, t0: number): Promise<Map<string, Partial<Record<Step, number>>>> {
  const seen = new Map<string, Partial<Record<Step, number>>>();
  for (;;) {
    const pods = await env.admin.list<Pod>(`/api/v1/namespaces/${NS}/pods`, { labelSelector: `runtime=${name}` });
    const at = performance.now() - t0;
    for (const p of pods.items) {
      const m = seen.get(p.metadata.name ?? '') ?? {};
      for (const st of stepsOf(p)) m[st] ??= at;
      seen.set(p.metadata.name ?? '', m);
    }
    if ([...seen.values()].filter((m) => m.both !== undefined).length >= 2) return seen;
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** RSS and its anonymous part (MiB) of this environment's runtimed and Runtime Server processes. */
function componentMemory(root: string): Record<'runtimed' | 'runtime-server', { rss: number; anon: number }[]> {
  const out: Record<'runtimed' | 'runtime-server', { rss: number; anon: number }[]> = {
    runtimed: [],
    'runtime-server': [],
  };
  const mine = new Set(cpuPids((cmd) => cmd.includes(root)));
  for (const pid of mine) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
      const m = /kruntimes\.(?:mjs|ts) (runtimed|runtime-server)\b/.exec(cmd);
      if (!m || !/(^|\/)node /.test(cmd)) continue;
      const st = readFileSync(`/proc/${pid}/status`, 'utf8');
      const kib = (k: string): number => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(st)?.[1] ?? NaN);
      out[m[1] as 'runtimed' | 'runtime-server'].push({ rss: kib('VmRSS') / 1024, anon: kib('RssAnon') / 1024 });
    } catch {
      /* gone */
    }
  }
  return out;
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
interface RuntimeSample {
  ms: number;
  cpuMs: number;
  firstMs: number;
  steps: Partial<Record<Step, number>>;
  mem: ReturnType<typeof componentMemory>;
  /** Where the first Pod's start went, from the node agent's and runtimed's own logs. */
  trace: string;
}

/**
 * The first Pod's start as its components logged it: when the node agent saw it and had launched
 * its containers (ms after the Runtime's create), and when each step of runtimed's start ended
 * (ms since runtimed's process started: health port, Runtime Server answering, Runs listed).
 */
async function startTrace(env: Env, root: string, pod: string, t0Epoch: number): Promise<string> {
  const out: string[] = [];
  try {
    const lines = readFileSync(join(root, 'logs', 'node-agent.log'), 'utf8').split('\n');
    const mine = lines.filter((l) => l.includes(`"pod":"${pod}"`));
    for (const l of mine.filter((x) => x.includes('"volume setup failed'))) {
      const r = JSON.parse(l) as { volume?: string; reason?: string; err?: { message?: string } };
      out.push(`volume ${r.volume} failed (${r.reason}: ${r.err?.message ?? ''})`);
    }
    const line = mine.find((l) => l.includes('"pod containers launched"'));
    if (line) {
      const r = JSON.parse(line) as { time: number; volumesMs: number; launchedMs: number };
      const at = r.time - t0Epoch;
      out.push(`agent saw ${at - r.launchedMs}, volumes ${r.volumesMs} ms, launched ${at}`);
    }
  } catch {
    /* no node agent log (kubelet) */
  }
  try {
    const log = await env.admin.getText(`/api/v1/namespaces/${NS}/pods/${pod}/log`, { container: 'runtimed' });
    const ready = log.split('\n').find((l) => l.includes('"runtimed ready"'));
    const marks = ready ? (JSON.parse(ready) as { startMs?: Record<string, number> }).startMs : undefined;
    if (marks) out.push(`runtimed ${JSON.stringify(marks)}`);
  } catch (err) {
    out.push(`runtimed log: ${err instanceof Error ? err.message : String(err)}`);
  }
  return out.join('; ');
}

async function runtimeOnce(env: Env, root: string, name: string): Promise<RuntimeSample> {
  const mine = (cmd: string): boolean => cmd.includes(root);
  const before = cpuTicks(mine);
  const t0 = performance.now();
  const t0Epoch = Date.now();
  await env.admin.create(`/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runtimes`, benchRuntime(name, 2, 4));
  const seen = await podsReady(env, name, t0);
  const ms = performance.now() - t0;
  const after = cpuTicks(mine);
  // The first Pod to be ready (both conditions) and its steps.
  const [first, steps = {}] =
    [...seen.entries()].sort(([, a], [, b]) => (a.both ?? Infinity) - (b.both ?? Infinity))[0] ?? [];
  await new Promise((r) => setTimeout(r, 3000));
  const trace = first ? await startTrace(env, root, first, t0Epoch) : '';
  const mem = componentMemory(root);
  const only = (m: Map<string, number>): Map<string, number> =>
    new Map([...m].filter(([k]) => k === 'runtimed' || k === 'runtime-server'));
  await env.admin.delete(`/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runtimes/${name}`);
  // The next sample must not see these processes end (their CPU would cancel the next Runtime's).
  await podsGone(env, name);
  return { ms, cpuMs: cpuTotalMs(only(before), only(after)), firstMs: steps.both ?? NaN, steps, mem, trace };
}

/** The tsx variant moves the bundle aside, so the images' entrypoint falls back to tsx; the base
 * variant puts BENCH_BASE_DIST's copy (under .kruntimes/) in its place for the round. */
async function variantOnce(env: Env, root: string, v: Variant, name: string): Promise<RuntimeSample> {
  const aside = `${BUNDLE_DIR}.bench-aside`;
  const base = join(REPO_ROOT, '.kruntimes', 'bench-base-dist');
  if (v !== 'bundle') renameSync(BUNDLE_DIR, aside);
  if (v === 'base') renameSync(base, BUNDLE_DIR);
  try {
    return await runtimeOnce(env, root, name);
  } finally {
    if (v === 'base') renameSync(BUNDLE_DIR, base);
    if (existsSync(aside)) renameSync(aside, BUNDLE_DIR);
  }
}

function printRound(v: Variant, r: RuntimeSample): void {
  const steps = STEPS.map((s) => `${s} ${r.steps[s]?.toFixed(0) ?? '?'}`).join(', ');
  const mem = (['runtimed', 'runtime-server'] as const)
    .map((c) => `${c} ${r.mem[c].map((m) => `${m.rss.toFixed(1)}/${m.anon.toFixed(1)}`).join(' ')}`)
    .join('; ');
  process.stdout.write(`  ${v}: first Pod: ${steps} ms; RSS/anon MiB: ${mem}\n    ${r.trace}\n`);
}

async function runtimeCase(): Promise<void> {
  const root = join(REPO_ROOT, '.kruntimes', 'bench', `startup-${process.pid}`);
  if (BASE_DIST) cpSync(BASE_DIST, join(REPO_ROOT, '.kruntimes', 'bench-base-dist'), { recursive: true });
  const env = await up({ root, ...benchUpOptions(['bench-a']) });
  const got: Record<Variant, { ms: number[]; cpu: number[]; first: number[]; rtd: number[]; rs: number[] }> = {
    bundle: { ms: [], cpu: [], first: [], rtd: [], rs: [] },
    tsx: { ms: [], cpu: [], first: [], rtd: [], rs: [] },
    base: { ms: [], cpu: [], first: [], rtd: [], rs: [] },
  };
  try {
    await env.admin.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    for (let i = 0; i < ROUNDS; i++) {
      for (const v of VARIANTS) {
        const r = await variantOnce(env, root, v, `rt-${v}-${i}`);
        got[v].ms.push(r.ms);
        got[v].cpu.push(r.cpuMs);
        got[v].first.push(r.firstMs);
        got[v].rtd.push(...r.mem.runtimed.map((m) => m.rss));
        got[v].rs.push(...r.mem['runtime-server'].map((m) => m.rss));
        printRound(v, r);
      }
    }
  } finally {
    env.admin.close();
    await down(root, { purge: true });
    rmSync(join(REPO_ROOT, '.kruntimes', 'bench-base-dist'), { recursive: true, force: true });
  }
  const p50 = (v: Variant, k: 'ms' | 'cpu' | 'first' | 'rtd' | 'rs'): number => summary(got[v][k]).p50;
  const [a, b = a] = VARIANTS as [Variant, Variant?];
  const line = (what: string, k: 'ms' | 'cpu' | 'first' | 'rtd' | 'rs', unit: string): string =>
    `${what} ${a} ${p50(a, k).toFixed(k === 'rtd' || k === 'rs' ? 1 : 0)} ${unit} vs ${b} ${p50(b, k).toFixed(k === 'rtd' || k === 'rs' ? 1 : 0)} ${unit} (${ratio(p50(a, k), p50(b, k))})`;
  process.stdout.write(
    `Runtime (2 Pods) created (p50 of ${ROUNDS}): ${line('→ Pods ready', 'ms', 'ms')}; ${line('→ first Pod ready', 'first', 'ms')}; ` +
      `${line('CPU of runtimed + Runtime Servers', 'cpu', 'ms')}; ${line('RSS runtimed', 'rtd', 'MiB')}; ${line('RSS Runtime Server', 'rs', 'MiB')}\n`,
  );
}

async function main(): Promise<void> {
  if (BENCH_NODE_KIND === 'kubelet')
    process.stdout.write('node kind: kubelet (the Runtime Server case runs on the host either way)\n');
  else if (process.env.BENCH_LOCAL !== '0') {
    await runtimeServerCase();
    functionsCase();
  }
  if (process.env.BENCH_CLUSTER !== '0') await runtimeCase();
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
