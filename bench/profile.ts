/**
 * A CPU profile of a running Node process of the environment, taken through its inspector
 * (SIGUSR1 opens it on 127.0.0.1:9229; one profile at a time on a machine), summarised by self
 * time per function and per source file, and the project's own functions with what they call.
 * For benchmarks only (BENCH_PROFILE=<component>; BENCH_PROFILE_OUT=<file> keeps the profile).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { WebSocket } from 'ws';
import { cpuPids } from './cpu.ts';

interface ProfileNode {
  id: number;
  children?: number[];
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

type Send = (method: string, params?: Record<string, unknown>) => Promise<Record<string, unknown>>;

async function inspectorUrl(): Promise<string> {
  for (let i = 0; i < 50; i++) {
    try {
      const list = (await (await fetch('http://127.0.0.1:9229/json/list')).json()) as {
        webSocketDebuggerUrl: string;
      }[];
      if (list[0]) return list[0].webSocketDebuggerUrl;
    } catch {
      /* not listening yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the process did not open its inspector on 127.0.0.1:9229');
}

async function connect(pid: number): Promise<{ send: Send; close: () => void }> {
  process.kill(pid, 'SIGUSR1');
  const ws = new WebSocket(await inspectorUrl());
  await new Promise((r, j) => ws.once('open', r).once('error', j));
  let id = 0;
  const pending = new Map<number, (r: Record<string, unknown>) => void>();
  ws.on('message', (m: Buffer) => {
    const x = JSON.parse(m.toString()) as { id?: number; result?: Record<string, unknown> };
    if (x.id !== undefined) pending.get(x.id)?.(x.result ?? {});
    if (x.id !== undefined) pending.delete(x.id);
  });
  const send: Send = (method, params = {}) =>
    new Promise((r) => {
      pending.set(++id, r);
      ws.send(JSON.stringify({ id, method, params }));
    });
  return { send, close: () => ws.close() };
}

/** Self time per key, as percentages of the profile's busy (not idle) time, largest first. */
export function selfTime(p: Profile, key: (n: ProfileNode) => string, top = 25): [string, number][] {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  let total = 0;
  p.samples.forEach((s, i) => {
    const n = byId.get(s);
    if (!n || n.callFrame.functionName === '(idle)') return;
    total += p.timeDeltas[i] ?? 0;
    self.set(key(n), (self.get(key(n)) ?? 0) + (p.timeDeltas[i] ?? 0));
  });
  total ||= 1;
  return [...self]
    .map(([k, v]): [string, number] => [k, (v / total) * 100])
    .sort((a, b) => b[1] - a[1])
    .slice(0, top);
}

/** Time per function of the project's own code (the bundle's chunks, or .ts sources) including what
 * it calls, as percentages of busy time: where the native and library time comes from. */
export function ownInclusive(p: Profile, top = 25): [string, number][] {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const own = (n: ProfileNode): boolean => /\/dist\/|\.ts$/.test(n.callFrame.url);
  const incl = new Map<string, number>();
  let total = 0;
  p.samples.forEach((s, i) => {
    const dt = p.timeDeltas[i] ?? 0;
    if (byId.get(s)?.callFrame.functionName === '(idle)') return;
    total += dt;
    const seen = new Set<string>();
    for (let id: number | undefined = s; id !== undefined; id = parent.get(id)) {
      const n = byId.get(id)!;
      if (!own(n) || seen.has(fnOf(n))) continue;
      seen.add(fnOf(n));
      incl.set(fnOf(n), (incl.get(fnOf(n)) ?? 0) + dt);
    }
  });
  return [...incl]
    .map(([k, v]): [string, number] => [k, (v / (total || 1)) * 100])
    .sort((a, b) => b[1] - a[1])
    .slice(0, top);
}

const fileOf = (n: ProfileNode): string => n.callFrame.url.split('/').slice(-2).join('/') || '(native)';
const fnOf = (n: ProfileNode): string =>
  `${n.callFrame.functionName || '(anonymous)'} ${fileOf(n)}:${n.callFrame.lineNumber + 1}`;

/** Profiles `pid` while `during` runs; returns a printable summary. */
export async function profileDuring(pid: number, during: () => Promise<void>): Promise<string> {
  const { send, close } = await connect(pid);
  await send('Profiler.enable');
  await send('Profiler.setSamplingInterval', { interval: 200 });
  await send('Profiler.start');
  const failed = await during().then(
    () => undefined,
    (err: unknown) => (err instanceof Error ? err : new Error(String(err))),
  );
  const { profile } = (await send('Profiler.stop')) as unknown as { profile: Profile };
  await send('Profiler.disable');
  // Closes the inspector's port again (Node's internal counterpart of SIGUSR1); it ends this
  // connection before it could answer.
  void send('Runtime.evaluate', { expression: 'process._debugEnd?.()' });
  await new Promise((r) => setTimeout(r, 100));
  close();
  if (failed) throw failed;
  const rows = (title: string, r: [string, number][]): string =>
    [title, ...r.map(([k, v]) => `  ${v.toFixed(1).padStart(5)}%  ${k}`)].join('\n');
  if (process.env.BENCH_PROFILE_OUT) writeFileSync(process.env.BENCH_PROFILE_OUT, JSON.stringify(profile));
  return [
    rows('self time by function', selfTime(profile, fnOf)),
    rows('by file', selfTime(profile, fileOf, 15)),
    rows("the project's functions, including what they call", ownInclusive(profile, 40)),
  ].join('\n');
}

const procCmd = (pid: number): string => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
};

/**
 * BENCH_PROFILE=<a component's command-line pattern, e.g. "kruntimes.mjs runtimed">: a CPU profile of
 * the first such process of this environment (`mine`) during `phase`, printed after it; without it,
 * just runs `fn`.
 */
export async function profiled(mine: (cmd: string) => boolean, phase: string, fn: () => Promise<void>): Promise<void> {
  const pattern = process.env.BENCH_PROFILE;
  if (!pattern) return fn();
  const pid = cpuPids((cmd) => mine(cmd)).find((p) => procCmd(p).includes(pattern));
  if (pid === undefined) throw new Error(`BENCH_PROFILE: no process of this environment matches ${pattern}`);
  process.stdout.write(`CPU profile of ${pattern} (pid ${pid}) during ${phase}:\n${await profileDuring(pid, fn)}\n`);
}
