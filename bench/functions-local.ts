/**
 * Function calls without a cluster (issue 15): the invoke path's real pieces on one machine, to
 * profile it hop by hop. A Runtime Server child process (as in a Runtime Pod) dials a DialIn
 * socket; the Runtime Gateway (authorization answered as allowed, cached as in a Pod) forwards to
 * it through RuntimeClient; the client is lib/invoke. Side by side, in the same run: a bare HTTPS
 * JSON echo (keep-alive), RuntimeClient straight to the Runtime Server (no gateway), and the
 * gateway, for a trivial bash and python handler; python also on its old path (a Runtime Server
 * with KRT_FUNCTION_CALL_HANDOFF=off stays between runtimed and the worker), bash also on its two
 * old paths (KRT_FUNCTION_CALL_HANDOFF=off: the Runtime Server between runtimed and the warm worker;
 * KRT_BASH_CALL_ISOLATION=subshell: a fork of the warm worker per call); and a call on a new TLS
 * connection to the gateway, next to the bare echo on a new connection. The Runtime Servers get the
 * caller's environment without its locale, as in a Runtime Pod (bench/pod-env.ts).
 *   npx tsx bench/functions-local.ts      # BENCH_CALLS=500 rounds, one call of each measure per round
 *   BENCH_BASE=<another checkout> ...       # also that checkout's bash and python Runtime Servers, in the same rounds
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { closeInvokeAgents, invokeEndpoint, type InvokeEndpoint } from '../lib/invoke/client.ts';
import type { Run } from '../runtimed/types.ts';
import { localEndpoint, localGateway, runtimeServer } from './fn-local.ts';
import { bareEcho, invokeFresh, PAYLOAD } from './bare-echo.ts';
import { interleaved, ms, ratio, summary } from './stats.ts';

const CALLS = Number(process.env.BENCH_CALLS ?? '500');
/** Another checkout (e.g. the base of a change): its bash Runtime Server is measured beside this one's. */
const BASE = process.env.BENCH_BASE;
async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'krt-fnbench-'));
  const servers = {
    bash: await runtimeServer(dir, 'bash'),
    python: await runtimeServer(dir, 'python'),
    // The old python call path (the Runtime Server between runtimed and the worker), side by side.
    hop: await runtimeServer(dir, 'python', 'hop', { KRT_FUNCTION_CALL_HANDOFF: 'off' }),
    // The old bash call paths side by side: the Runtime Server between runtimed and the worker, and a subshell per call.
    bashhop: await runtimeServer(dir, 'bash', 'bashhop', { KRT_FUNCTION_CALL_HANDOFF: 'off' }),
    bashsub: await runtimeServer(dir, 'bash', 'bashsub', { KRT_BASH_CALL_ISOLATION: 'subshell' }),
    ...(BASE
      ? {
          bashbase: await runtimeServer(dir, 'bash', 'bashbase', {}, BASE),
          pybase: await runtimeServer(dir, 'python', 'pybase', {}, BASE),
        }
      : {}),
  };
  const gw = await localGateway((name) => {
    if (name === 'fn-noop') return { code: 200, run: {} as Run, call: (p) => Promise.resolve({ ok: true, output: p }) };
    const byName = {
      'fn-bash': 'bash',
      'fn-hop': 'hop',
      'fn-bashsub': 'bashsub',
      'fn-bashhop': 'bashhop',
      'fn-bashbase': 'bashbase',
      'fn-pybase': 'pybase',
    } as const;
    const server = byName[name as keyof typeof byName] ?? 'python';
    const id = server.startsWith('bash') ? 'bash' : 'python';
    return { code: 200, run: {} as Run, call: (p) => servers[server]!.rc.invokeFunction(id, p) };
  });
  const bare = await bareEcho();
  const bareProc = await bareEcho(true);
  try {
    const ep = (name: string): InvokeEndpoint => localEndpoint(gw, name);
    const payload = JSON.stringify(PAYLOAD);
    const r = await interleaved(CALLS, {
      'bare HTTPS round trip (keep-alive)': bare.call,
      'bare HTTPS round trip to a separate process': bareProc.call,
      'gateway alone (a target that answers at once)': () => invokeEndpoint(ep('fn-noop'), 'token', PAYLOAD),
      'python old path: RuntimeClient -> Runtime Server -> worker': () =>
        servers.hop.rc.invokeFunction('python', payload),
      'python new path: RuntimeClient -> worker': () => servers.python.rc.invokeFunction('python', payload),
      'python old path: through the gateway': () => invokeEndpoint(ep('fn-hop'), 'token', PAYLOAD),
      'python new path: through the gateway': () => invokeEndpoint(ep('fn-python'), 'token', PAYLOAD),
      'bash old path (subshell per call): Runtime Server direct': () =>
        servers.bashsub.rc.invokeFunction('bash', payload),
      'bash old path (Runtime Server between): RuntimeClient -> Runtime Server -> worker': () =>
        servers.bashhop.rc.invokeFunction('bash', payload),
      'bash new path (the worker holds the channel): RuntimeClient -> worker': () =>
        servers.bash.rc.invokeFunction('bash', payload),
      'bash old path (subshell per call): through the gateway': () =>
        invokeEndpoint(ep('fn-bashsub'), 'token', PAYLOAD),
      'bash old path (Runtime Server between): through the gateway': () =>
        invokeEndpoint(ep('fn-bashhop'), 'token', PAYLOAD),
      'bash new path (the worker holds the channel): through the gateway': () =>
        invokeEndpoint(ep('fn-bash'), 'token', PAYLOAD),
      ...(BASE
        ? {
            [`bash, ${BASE}: RuntimeClient -> worker`]: () => servers.bashbase!.rc.invokeFunction('bash', payload),
            [`bash, ${BASE}: through the gateway`]: () => invokeEndpoint(ep('fn-bashbase'), 'token', PAYLOAD),
            [`python, ${BASE}: RuntimeClient -> worker`]: () => servers.pybase!.rc.invokeFunction('python', payload),
            [`python, ${BASE}: through the gateway`]: () => invokeEndpoint(ep('fn-pybase'), 'token', PAYLOAD),
          }
        : {}),
      'bare HTTPS echo (separate process), new TLS connection per call': bareProc.fresh,
      'bash new path through the gateway, new TLS connection per call': () => invokeFresh(ep('fn-bash'), 'token'),
    });
    const base = summary(r['bare HTTPS round trip (keep-alive)']?.lat ?? []).p50;
    const baseProc = summary(r['bare HTTPS round trip to a separate process']?.lat ?? []).p50;
    const lines = [
      `function calls without a cluster: ${CALLS} rounds, one call of each measure per round; payload ${payload}`,
    ];
    for (const [name, m] of Object.entries(r)) {
      const x = summary(m.lat);
      lines.push(
        `${name.padEnd(82)} p50 ${ms(x.p50).padStart(8)}  p99 ${ms(x.p99).padStart(8)}  ${m.perSec.toFixed(0).padStart(5)}/s  ${ratio(x.p50, base)} bare  ${ratio(x.p50, baseProc)} bare-process`,
      );
    }
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    bare.close();
    bareProc.close();
    closeInvokeAgents();
    gw.close();
    for (const s of Object.values(servers)) s.child.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
process.exit(0);
