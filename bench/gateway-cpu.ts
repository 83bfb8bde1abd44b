/**
 * The Runtime Gateway's own CPU per bash call (issue 15; not a test), without a cluster: this
 * process is runtimed's side (the gateway, authorization answered as allowed, metrics on, and
 * RuntimeClient to a bash Runtime Server child process whose worker holds the call channel); the
 * client is a separate Node process calling with keep-alive, one call at a time. Prints the client's
 * and this process's CPU per call (process.cpuUsage), the client's p50 and p99, and how many reads of
 * the worker's answer runtimed takes per call ('data' events on the channel). PROF_OUT=<file> also
 * writes a V8 CPU profile of this process during the calls (chrome devtools format).
 * BENCH_BASE=<another checkout with this file> also starts that checkout's side (gateway and Runtime
 * Server) in a child process; the client then alternates its calls between the two, so both are
 * measured in the same minutes (this process's CPU is then per call it served).
 * BENCH_LANG=python calls a python function (its worker holds the channel too) instead of a bash one.
 *   npx tsx bench/gateway-cpu.ts      # PROF_CALLS=3000 (per side)
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Run } from '../runtimed/types.ts';
import { GatewayMetrics } from '../runtimed/gateway-metrics.ts';
import { localEndpoint, localGateway, runtimeServer } from './fn-local.ts';

const dir = mkdtempSync(join(tmpdir(), 'krt-gwcpu-'));
const LANG = process.env.BENCH_LANG === 'python' ? 'python' : 'bash';
const { rc, child } = await runtimeServer(dir, LANG);
const m = new GatewayMetrics();
const gw = await localGateway(() => ({ code: 200, run: {} as Run, call: (p) => rc.invokeFunction(LANG, p) }), {
  current: m,
  load: () => Promise.resolve(m),
  use: (f: (x: GatewayMetrics) => void) => f(m),
} as never);
const ep = localEndpoint(gw, 'fn-bash');
function stop(): never {
  child.kill();
  gw.close();
  rmSync(dir, { recursive: true, force: true });
  process.exit(0);
}
if (process.env.GW_SERVE === '1') {
  // The other side of a BENCH_BASE run: serve until stdin closes.
  process.stdout.write(`${JSON.stringify(ep)}\n`);
  await new Promise((r) => process.stdin.on('end', r).resume());
  stop();
}
const BASE = process.env.BENCH_BASE;
const base = BASE
  ? spawn(process.execPath, ['--import', 'tsx', join(BASE, 'bench', 'gateway-cpu.ts')], {
      cwd: BASE,
      env: { ...process.env, GW_SERVE: '1' },
      stdio: ['pipe', 'pipe', 'inherit'],
    })
  : undefined;
const eps = [ep];
if (base) eps.push(JSON.parse(String(await new Promise((r) => base.stdout.once('data', r)))) as typeof ep);
const token = 'x'.repeat(900);
const N = Number(process.env.PROF_CALLS ?? '3000');
const clientCode = `const https=require('node:https');const [eps,token,n]=[JSON.parse(process.argv[1]),process.argv[2],+process.argv[3]];
const body='{"n":1,"s":"hello"}';const lat=eps.map(()=>[]);
const sides=eps.map((e)=>({url:e.url,agent:new https.Agent({keepAlive:true,ca:Buffer.from(e.caBundle,'base64').toString()})}));
const one=(s)=>new Promise((res,rej)=>{const r=https.request(s.url,{method:'POST',agent:s.agent,headers:{Authorization:'Bearer '+token,'Content-Type':'application/json','Content-Length':body.length}},(x)=>{x.resume();x.on('end',res)});r.on('error',rej);r.end(body)});
const pct=(a,p)=>{const s=[...a].sort((x,y)=>x-y);return s[Math.min(s.length-1,Math.ceil(p/100*s.length)-1)]*1000};
(async()=>{for(let i=0;i<300;i++)for(const s of sides)await one(s);process.stdout.write('warm\\n');await new Promise(r=>process.stdin.once('data',r));
const t0=performance.now();const c0=process.cpuUsage();
for(let i=0;i<n;i++)for(let k=0;k<sides.length;k++){const t=performance.now();await one(sides[k]);lat[k].push(performance.now()-t)}
const c=process.cpuUsage(c0);const calls=n*sides.length;
process.stdout.write(JSON.stringify({wall:(performance.now()-t0)/calls*1000,cpu:(c.user+c.system)/calls,p50:lat.map(l=>pct(l,50)),p99:lat.map(l=>pct(l,99))})+'\\n');process.exit(0)})();`;
const cl = spawn(process.execPath, ['-e', clientCode, JSON.stringify(eps), token, String(N)], {
  stdio: ['pipe', 'pipe', 'inherit'],
});
await new Promise((r) => cl.stdout.once('data', r));
let events = 0;
(rc as unknown as { channels: Map<string, { socket: { on(e: string, f: () => void): void } }> }).channels
  .get(LANG)!
  .socket.on('data', () => events++);
const s = new Session();
s.connect();
await s.post('Profiler.enable');
await s.post('Profiler.setSamplingInterval', { interval: 50 });
if (process.env.PROF_OUT) await s.post('Profiler.start');
const cpu0 = process.cpuUsage();
const out = new Promise<string>((r) => cl.stdout.once('data', (c: Buffer) => r(c.toString())));
cl.stdin.write('go\n');
const res = JSON.parse(await out) as { wall: number; cpu: number; p50: number[]; p99: number[] };
const cpu = process.cpuUsage(cpu0);
if (process.env.PROF_OUT) writeFileSync(process.env.PROF_OUT, JSON.stringify((await s.post('Profiler.stop')).profile));
const us = (n: number | undefined): string => `${(n ?? NaN).toFixed(0)} µs`;
const lines = [
  `client: wall/call ${us(res.wall)}, CPU/call ${us(res.cpu)}`,
  `this checkout: p50 ${us(res.p50[0])} p99 ${us(res.p99[0])}; gateway process CPU/call ${us((cpu.user + cpu.system) / N)}; data events/call ${(events / N).toFixed(2)}`,
];
if (BASE)
  lines.push(
    `${BASE}: p50 ${us(res.p50[1])} p99 ${us(res.p99[1])}`,
    `this checkout / ${BASE}: p50 ${((res.p50[0] ?? NaN) / (res.p50[1] ?? NaN)).toFixed(3)}x`,
  );
process.stdout.write(`${lines.join('\n')}\n`);
base?.stdin.end();
stop();
