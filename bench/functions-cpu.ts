/**
 * Where a function call's CPU goes, process by process (issue 15; not a test): a bash and a python
 * function Run in an own environment, and the bare HTTPS echo in a separate process. Per measure a
 * steady loop of PROF_CALLS calls (after 100 warm-up calls), then the CPU each process spent
 * (/proc/<pid>/stat, user + system) divided by the calls: the client (this process), runtimed
 * (the Runtime Gateway), the worker, the Runtime Server and everything else on the machine.
 * Not interleaved (bench/functions.ts compares latencies); this says which process pays.
 *   npx tsx bench/functions-cpu.ts      # PROF_CALLS=2000, PROF_ROUNDS=2
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { down, up } from '../localenv/environment.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import { closeInvokeAgents, endpointOf, invokeEndpoint, type InvokeEndpoint } from '../lib/invoke/client.ts';
import { functionRuns, type BenchFunction } from './fn-runs.ts';
import { bareEcho, PAYLOAD } from './bare-echo.ts';
import { summary } from './stats.ts';

const N = Number(process.env.PROF_CALLS ?? '2000');
const NS = 'bench';
const FNS: BenchFunction[] = [
  { name: 'bash', lang: 'bash' },
  { name: 'python', lang: 'python' },
];

function procs(): Map<number, { name: string; ticks: number }> {
  const out = new Map<number, { name: string; ticks: number }>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const st = readFileSync(`/proc/${d}/stat`, 'utf8');
      const f = st.slice(st.lastIndexOf(') ') + 2).split(' ');
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0').filter(Boolean);
      const c = cmd.join(' ');
      let name = st.slice(st.indexOf('(') + 1, st.lastIndexOf(')'));
      if (Number(d) === process.pid) name = 'BENCH client';
      else if (c.includes('krt-function')) name = 'bash worker';
      else if (c.includes('function-worker')) name = 'python worker';
      else if (c.includes(' runtimed')) name = `runtimed`;
      else if (c.includes('runtime-server')) name = `runtime-server`;
      else if (c.includes('process.env.CERT')) name = 'bare echo process';
      out.set(Number(d), { name, ticks: Number(f[11]) + Number(f[12]) });
    } catch {
      /* gone */
    }
  }
  return out;
}
function cpuDelta(
  a: Map<number, { name: string; ticks: number }>,
  b: Map<number, { name: string; ticks: number }>,
): Map<string, number> {
  const by = new Map<string, number>();
  for (const [pid, e] of b) {
    const d = e.ticks - (a.get(pid)?.ticks ?? 0);
    if (d > 0) by.set(e.name, (by.get(e.name) ?? 0) + d);
  }
  return by;
}
async function loop(name: string, f: () => Promise<unknown>): Promise<void> {
  for (let i = 0; i < 100; i++) await f();
  const lat: number[] = [];
  const a = procs();
  const t0 = performance.now();
  for (let i = 0; i < N; i++) {
    const t = performance.now();
    await f();
    lat.push(performance.now() - t);
  }
  const wall = performance.now() - t0;
  const b = procs();
  const s = summary(lat);
  const lines = [
    `${name}: p50 ${(s.p50 * 1000).toFixed(0)} µs p99 ${(s.p99 * 1000).toFixed(0)} µs, wall/call ${((wall / N) * 1000).toFixed(0)} µs`,
  ];
  const d = [...cpuDelta(a, b)].sort((x, y) => y[1] - x[1]).slice(0, 14);
  let tot = 0;
  for (const [, t] of cpuDelta(a, b)) tot += t;
  for (const [k, t] of d) lines.push(`   ${k.padEnd(28)} ${((t * 10_000) / N).toFixed(0).padStart(6)} µs CPU/call`);
  lines.push(
    `   ${'TOTAL'.padEnd(28)} ${((tot * 10_000) / N).toFixed(0).padStart(6)} µs CPU/call (2 cores: ${(((tot * 10_000) / N / ((wall / N) * 1000)) * 100).toFixed(0)}% of one core per wall time)`,
  );
  process.stdout.write(lines.join('\n') + '\n');
}

async function main(): Promise<void> {
  const root = join(REPO_ROOT, '.kruntimes', 'bench', `functions-cpu-${process.pid}`);
  const env = await up({ root, ...(process.env.KRT_BIN_DIR ? { binDir: process.env.KRT_BIN_DIR } : {}) });
  const bareProc = await bareEcho(true);
  try {
    const token = await functionRuns(env.admin, NS, FNS);
    const ep: Record<string, InvokeEndpoint> = {};
    for (const name of ['bash', 'python']) ep[name] = await endpointOf(env.admin, NS, `fn-${name}`);
    process.stdout.write(`endpoints ${JSON.stringify(Object.values(ep).map((e) => e.url))}\n`);
    const m: Record<string, () => Promise<unknown>> = {
      'bare-process': bareProc.call,
      bash: () => invokeEndpoint(ep.bash as InvokeEndpoint, token, PAYLOAD),
      python: () => invokeEndpoint(ep.python as InvokeEndpoint, token, PAYLOAD),
    };
    const idle = procs();
    await new Promise((r) => setTimeout(r, 3000));
    const idleD = cpuDelta(idle, procs());
    process.stdout.write(
      `idle 3 s: ${[...idleD]
        .sort((x, y) => y[1] - x[1])
        .slice(0, 8)
        .map(([k, t]) => `${k} ${t * 10} ms`)
        .join(', ')}\n`,
    );
    for (let r = 0; r < Number(process.env.PROF_ROUNDS ?? '2'); r++)
      for (const [k, f] of Object.entries(m)) await loop(k, f);
  } finally {
    bareProc.close();
    closeInvokeAgents();
    env.admin.close();
    await down(root, { purge: true });
  }
}
await main();
process.exit(0);
