/**
 * The Runtime Gateway's own CPU per bash call (issue 15; not a test), without a cluster: this
 * process is runtimed's side (the gateway, authorization answered as allowed, metrics on, and
 * RuntimeClient to a bash Runtime Server child process whose worker holds the call channel); the
 * client is a separate Node process calling with keep-alive, one call at a time. Prints the client's
 * and this process's CPU per call (process.cpuUsage) and how many reads of the worker's answer
 * runtimed takes per call ('data' events on the channel). PROF_OUT=<file> also writes a V8 CPU
 * profile of this process during the calls (chrome devtools format).
 *   npx tsx bench/gateway-cpu.ts      # PROF_CALLS=3000
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
const { rc, child } = await runtimeServer(dir, 'bash');
const m = new GatewayMetrics();
const gw = await localGateway(() => ({ code: 200, run: {} as Run, call: (p) => rc.invokeFunction('bash', p) }), {
  current: m,
  load: () => Promise.resolve(m),
  use: (f: (x: GatewayMetrics) => void) => f(m),
} as never);
const ep = localEndpoint(gw, 'fn-bash');
const token = 'x'.repeat(900);
const N = Number(process.env.PROF_CALLS ?? '3000');
const clientCode = `const https=require('node:https');const [url,ca,token,n]=process.argv.slice(1);
const agent=new https.Agent({keepAlive:true,ca:Buffer.from(ca,'base64').toString()});const body='{"n":1,"s":"hello"}';
const one=()=>new Promise((res,rej)=>{const r=https.request(url,{method:'POST',agent,headers:{Authorization:'Bearer '+token,'Content-Type':'application/json','Content-Length':body.length}},(x)=>{x.resume();x.on('end',res)});r.on('error',rej);r.end(body)});
(async()=>{for(let i=0;i<300;i++)await one();process.stdout.write('warm\\n');await new Promise(r=>process.stdin.once('data',r));const t0=performance.now();const c0=process.cpuUsage();for(let i=0;i<+n;i++)await one();const c=process.cpuUsage(c0);process.stdout.write('client wall/call '+((performance.now()-t0)/n*1000).toFixed(0)+' us, client CPU/call '+((c.user+c.system)/n).toFixed(0)+' us\\n');process.exit(0)})();`;
const cl = spawn(process.execPath, ['-e', clientCode, ep.url, ep.caBundle ?? '', token, String(N)], {
  stdio: ['pipe', 'pipe', 'inherit'],
});
await new Promise((r) => cl.stdout.once('data', r));
let events = 0;
(rc as unknown as { channels: Map<string, { socket: { on(e: string, f: () => void): void } }> }).channels
  .get('bash')!
  .socket.on('data', () => events++);
const s = new Session();
s.connect();
await s.post('Profiler.enable');
await s.post('Profiler.setSamplingInterval', { interval: 50 });
if (process.env.PROF_OUT) await s.post('Profiler.start');
const t0 = performance.now();
const cpu0 = process.cpuUsage();
const out = new Promise<string>((r) => cl.stdout.once('data', (c: Buffer) => r(c.toString())));
cl.stdin.write('go\n');
process.stdout.write(await out);
const cpu = process.cpuUsage(cpu0);
const wall = performance.now() - t0;
if (process.env.PROF_OUT) writeFileSync(process.env.PROF_OUT, JSON.stringify((await s.post('Profiler.stop')).profile));
process.stdout.write(
  `data events/call ${(events / N).toFixed(2)}; wall/call ${((wall / N) * 1000).toFixed(0)} µs, gateway process CPU/call ${((cpu.user + cpu.system) / N).toFixed(0)} µs\n`,
);
child.kill();
gw.close();
rmSync(dir, { recursive: true, force: true });
process.exit(0);
