/**
 * One invocation per transport, no cluster (issue 13; not a test): the run-scheduler handler on a
 * key whose state holds a Runtime and 50 pending Runs, invoked in process, over the webhook
 * transport (`functionApp` behind TLS on loopback, in this process) and over the lambda transport
 * (the Runtime Interface Emulator + aws-lambda-ric running cmd/lambda.handler, one execution
 * environment, host processes). Wall time and CPU per invocation, both sides counted (this process,
 * plus the emulator and runtime processes for lambda). The reads template is warm: one round each.
 *   npx tsx bench/transport-micro.ts        # 500 invocations after 50 warm-up
 */
import https from 'node:https';
import { pino } from 'pino';
import { loadFunctions, watchFunctions } from '../apiserver/functions.ts';
import { functionApp } from '../apiserver/fnserver.ts';
import { LambdaTransport, loadLambdaConfig } from '../apiserver/lambda.ts';
import { inprocess, loadTransportConfig, WebhookTransport, type Transport } from '../apiserver/transport.ts';
import { startLambdaRie } from '../e2e/lambda-rie.ts';
import { buildBundle } from '../localenv/bundle.ts';
import { FakeState } from '../lib/fn/fake-state.ts';
import { handlerState } from '../lib/fn/ignore.ts';
import { R } from '../lib/fn/resources.ts';
import type { ReconcileInput, WatchFunction } from '../lib/fn/types.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { createCa, issueServing } from '../lib/tls/certs.ts';
import { cpuTicks, cpuTotalMs } from './cpu.ts';

const N = Number(process.env.BENCH_CALLS ?? '500');
const WARM = 50;
/** Finished Runs of the same namespace (a burst's namespace holds the earlier bursts' Runs until their TTL). */
const DONE = Number(process.env.BENCH_DONE ?? '0');
const LAMBDA = process.env.BENCH_LAMBDA !== '0';

/** A finished Run as runtimed leaves it (the size that matters on the wire). */
function finished(i: number): KubeObject {
  const t = '2026-12-01T09:00:00Z';
  const cond = (type: string, reason: string): Record<string, string> => ({
    type,
    status: 'True',
    reason,
    message: `${reason} on runtime pod bash-7d9f-x${i}`,
    lastTransitionTime: t,
  });
  return {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'Run',
    metadata: {
      name: `done-${i}`,
      namespace: 'ns',
      uid: `d-${i}-6f1c3b2a-9e4d-4c8b-a1f0-2b7e9d3c5a10`,
      resourceVersion: String(1000 + i),
      generation: 1,
      creationTimestamp: t,
      labels: { 'bench-tag': 'b-webhook-0' },
    },
    spec: { runtime: 'bash', mode: { task: { args: [`echo done-${i}`] } }, ttlSecondsAfterFinished: 300 },
    status: {
      phase: 'Succeeded',
      attempt: 1,
      assignedPod: `bash-7d9f-x${i % 2}`,
      assignedPodUID: '0c1e2d3f-4a5b-6c7d-8e9f-a0b1c2d3e4f5',
      message: 'exit code 0',
      startTime: t,
      completionTime: t,
      exitCode: 0,
      conditions: [cond('Scheduled', 'Assigned'), cond('Running', 'Started'), cond('Complete', 'Succeeded')],
    },
  };
}

/** The relay's input for the key: the cached state without what the function ignores (lib/fn/ignore.ts). */
function input(fn: WatchFunction): ReconcileInput {
  const state = new FakeState([
    [R.runtimes, { apiVersion: 'kruntimes.io/v1alpha1', kind: 'Runtime', metadata: { name: 'bash', namespace: 'ns' } }],
  ]);
  for (let i = 0; i < 50; i++)
    state.put(R.runs, {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'Run',
      metadata: { name: `r-${i}`, namespace: 'ns', uid: `u-${i}`, creationTimestamp: '2026-12-01T10:00:00Z' },
      spec: { runtime: 'bash', mode: { task: { args: [`echo ${i}`] } } },
      status: { phase: 'Pending' },
    });
  for (let i = 0; i < DONE; i++) state.put(R.runs, finished(i));
  const key = 'ns/bash';
  return { key, object: state.get(R.runtimes, 'ns', 'bash'), state: handlerState(fn, state, key), now: new Date() };
}

async function measure(t: Transport, fn: WatchFunction, others: (cmd: string) => boolean): Promise<string> {
  const inp = input(fn);
  for (let i = 0; i < WARM; i++) await t.invoke(fn, inp);
  const [c0, o0, t0] = [process.cpuUsage(), cpuTicks(others), performance.now()];
  for (let i = 0; i < N; i++) await t.invoke(fn, inp);
  const wall = (performance.now() - t0) / N;
  const c = process.cpuUsage(c0);
  const cpu = ((c.user + c.system) / 1000 + cpuTotalMs(o0, cpuTicks(others))) / N;
  return `| \`${t.name}\`${' '.repeat(10 - t.name.length)}| ${wall.toFixed(2)} ms | ${cpu.toFixed(2)} ms |`;
}

async function main(): Promise<void> {
  const fn = watchFunctions(await loadFunctions()).find((f) => f.name === 'run-scheduler')!;
  const rows: string[] = [await measure(inprocess, fn, () => false)];

  const now = new Date();
  const ca = await createCa('bench-ca', now, 1);
  const cert = await issueServing(ca, 'fn', { dns: ['*.ns.svc'], ips: [] }, now, 1);
  const server = https.createServer({ cert: cert.cert, key: cert.key }, functionApp([fn], pino({ level: 'silent' })));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const address = `127.0.0.1:${(server.address() as { port: number }).port}`;
  const agent = new https.Agent({ keepAlive: true, ca: ca.cert });
  const cfg = { ...loadTransportConfig({ KRT_FUNCTION_TRANSPORT: 'webhook' }, 'ns'), caFile: '' };
  rows.push(await measure(new WebhookTransport({ endpoints: { pick: () => address }, agent, cfg }), fn, () => false));
  agent.destroy();
  server.close();

  if (!LAMBDA) return print(rows);
  await buildBundle(); // the Lambda runs the bundle (cmd/lambda.mjs), as in its image
  const rie = await startLambdaRie(1, { KRT_FUNCTIONS: 'run-scheduler' });
  const lambda = new LambdaTransport(loadLambdaConfig(rie.env), undefined);
  try {
    rows.push(await measure(lambda, fn, (cmd) => /aws-lambda-ri[ce]/.test(cmd)));
  } finally {
    lambda.stop();
    rie.stop();
  }
  print(rows);
}

function print(rows: string[]): void {
  process.stdout.write(
    [
      `${DONE} finished Runs beside the 50 pending ones`,
      '',
      '| Transport   | wall per invocation | CPU per invocation (all sides) |',
      '|---|---|---|',
      ...rows,
      '',
    ].join('\n'),
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
