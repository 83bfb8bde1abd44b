/**
 * The warm bash worker alone (issue 15, ADR 0028): no Runtime Server, no runtimed, no gateway. A
 * worker is started as the Runtime Server starts one that holds runtimed's call channel (its
 * stdin and stdout one end of a Unix socket), and this process drives it as runtimed does (call
 * frames out, CallOutput in), one call at a time, for the trivial echo handler of the function
 * benchmarks. Measures per worker: the round trip, and the worker's own CPU per call
 * (/proc/<pid>/stat). `BENCH_BASE=<another checkout>` runs that checkout's worker script beside
 * this one's, interleaved call by call, so both see the same load. The locale is the C locale, as
 * in a Runtime Pod.
 *   npx tsx bench/bash-worker.ts      # BENCH_CALLS=3000
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CallOutput, callFrame, callToken } from '../runtimed/runtime-server/bash-calls.ts';
import { BASH_WORKER } from '../runtimed/runtime-server/bash-process.ts';
import { podEnv } from './pod-env.ts';
import { interleaved, summary } from './stats.ts';

const CALLS = Number(process.env.BENCH_CALLS ?? '3000');
const BASE = process.env.BENCH_BASE;
const PAYLOAD = '{"n":1,"s":"hello"}';

interface Driven {
  call: () => Promise<void>;
  /** The worker's user + system CPU so far, in clock ticks (1/100 s). */
  cpuTicks: () => number;
  close: () => void;
}

/** Both ends of a Unix socket: one for the worker's stdin/stdout, one for this process. */
async function socketPair(dir: string): Promise<[Socket, Socket]> {
  const srv = createServer();
  const path = join(dir, 'w.sock');
  await new Promise<void>((r) => srv.listen(path, r));
  const accepted = new Promise<Socket>((r) => srv.once('connection', r));
  const ours = connect(path);
  const theirs = await accepted;
  srv.close();
  return [theirs, ours];
}

/** Resolves once the worker wrote its ready line on fd 3; rejects when it ends first. */
function ready(w: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    (w.stdio[3] as NodeJS.ReadableStream).once('data', () => resolve());
    w.once('exit', (code) => reject(new Error(`the worker exited with ${code}`)));
  });
}

/** Starts `script` as a worker of the echo handler in a new directory and drives it. */
async function driven(script: string): Promise<Driven> {
  const dir = mkdtempSync(join(tmpdir(), 'krt-bwbench-'));
  writeFileSync(join(dir, 'echo.sh'), 'echo() { printf "%s" "$1"; }\n');
  writeFileSync(join(dir, 'lease'), '\n');
  const [theirs, ours] = await socketPair(dir);
  const w = spawn('bash', ['--norc', '-c', script, 'krt-function', join(dir, 'echo.sh'), 'echo', dir], {
    cwd: dir,
    env: podEnv(process.env),
    detached: true,
    stdio: [theirs, theirs, 'inherit', 'pipe'],
  });
  await ready(w);
  const out = new CallOutput('\n-');
  let waiting: ((ok: boolean) => void) | undefined;
  ours.on('data', (c: Buffer) => {
    const r = out.push(c);
    if (r && r !== 'overflow') waiting?.(r.status === '0' && r.output === PAYLOAD);
  });
  return {
    call: () =>
      new Promise<void>((resolve, reject) => {
        const token = callToken();
        out.reset(`\n${token} `);
        waiting = (ok) => (ok ? resolve() : reject(new Error('the worker answered something else')));
        ours.write(callFrame(token, PAYLOAD));
      }),
    cpuTicks: () => {
      const f = readFileSync(`/proc/${w.pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
      return Number(f[11]) + Number(f[12]);
    },
    close: () => {
      if (w.pid) process.kill(-w.pid, 'SIGKILL');
      ours.destroy();
      theirs.destroy();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function main(): Promise<void> {
  const workers: Record<string, Driven> = { 'this checkout': await driven(BASH_WORKER) };
  if (BASE) {
    const mod = pathToFileURL(join(BASE, 'runtimed', 'runtime-server', 'bash-process.ts')).href;
    workers[BASE] = await driven(((await import(mod)) as { BASH_WORKER: string }).BASH_WORKER);
  }
  try {
    const before = Object.fromEntries(Object.entries(workers).map(([k, w]) => [k, w.cpuTicks()]));
    const measures = Object.fromEntries(Object.entries(workers).map(([k, w]) => [k, w.call]));
    const r = await interleaved(CALLS, measures, 50);
    const lines = [`the bash worker alone: ${CALLS} calls each, interleaved; payload ${PAYLOAD}`];
    for (const [k, w] of Object.entries(workers)) {
      const s = summary(r[k]?.lat ?? []);
      const cpuUs = ((w.cpuTicks() - (before[k] ?? 0)) * 10_000) / (CALLS + 50);
      const us = (v: number): string => `${(v * 1000).toFixed(0)} µs`;
      lines.push(`${k.padEnd(40)} p50 ${us(s.p50)}  p99 ${us(s.p99)}  worker CPU per call ${cpuUs.toFixed(0)} µs`);
    }
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    for (const w of Object.values(workers)) w.close();
  }
}

await main();
process.exit(0);
