/**
 * Function-mode benchmark (not a test, issue 15): calls of a trivial bash and python handler on
 * Ready function Runs through the Runtime Gateway (HTTPS keep-alive, Bearer token, cached
 * authorization -> runtimed -> the python worker, or the Runtime Server for bash), one at a time;
 * next to, in the same run, a bare HTTPS round trip (keep-alive, JSON echo; the echo in the bench
 * process, as before, and in a separate local process, as a call to a local server crosses one),
 * the python call on the old path (a second python Runtime with KRT_FUNCTION_CALL_HANDOFF=off:
 * runtimed -> Runtime Server -> worker), the bash call on the old path (a second bash Runtime with
 * KRT_FUNCTION_CALL_HANDOFF=off: runtimed -> Runtime Server -> warm worker), a bash call and the bare
 * echo on a new TLS connection each (what a client that does not keep its connection pays: TCP and
 * TLS handshakes with the gateway), and the same work as task Runs (create -> Succeeded,
 * client-observed).
 *   npx tsx bench/functions.ts           # BENCH_CALLS=300 rounds (one call of each per round), BENCH_TASKS=20 task Runs
 *   BENCH_ORDER=rotate ...                # each round starts one measure later (no measure always follows the same one)
 */
import { join } from 'node:path';
import { down, up } from '../localenv/environment.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import type { KubeClient } from '../lib/kube/client.ts';
import { closeInvokeAgents, endpointOf, invokeEndpoint, type InvokeEndpoint } from '../lib/invoke/client.ts';
import { functionRuns, until, type BenchFunction, type Run } from './fn-runs.ts';
import { bareEcho, invokeFresh, PAYLOAD } from './bare-echo.ts';
import { interleaved, ms, percentile, ratio, summary } from './stats.ts';

const CALLS = Number(process.env.BENCH_CALLS ?? '300');
const TASKS = Number(process.env.BENCH_TASKS ?? '20');
/** BENCH_ORDER=rotate: each round starts one measure later (bench/stats.ts roundOrder); default: the same order every round. */
const ROTATE = process.env.BENCH_ORDER === 'rotate';
const NS = 'bench';
const G = `/apis/kruntimes.io/v1alpha1/namespaces/${NS}`;

/** The old call paths (KRT_FUNCTION_CALL_HANDOFF=off), measured beside the new ones in the same run. */
const OLD_PATH = [{ name: 'KRT_FUNCTION_CALL_HANDOFF', value: 'off' }];
const FNS: BenchFunction[] = [
  { name: 'bash', lang: 'bash' },
  { name: 'bash-hop', lang: 'bash', env: OLD_PATH },
  { name: 'python', lang: 'python' },
  { name: 'python-hop', lang: 'python', env: OLD_PATH },
];
const TASK = {
  bash: { inline: `printf '%s' '${JSON.stringify(PAYLOAD)}'\n` },
  python: { inline: `import json\nprint(json.dumps(${JSON.stringify(PAYLOAD)}))\n` },
};

async function taskRuns(api: KubeClient, lang: 'bash' | 'python', n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await api.create(`${G}/runs`, {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'Run',
      metadata: { name: `task-${lang}-${i}` },
      spec: { runtime: lang, source: TASK[lang] },
    });
    await until(async () =>
      ['Succeeded', 'Failed'].includes((await api.get<Run>(`${G}/runs/task-${lang}-${i}`)).status?.phase ?? '')
        ? true
        : undefined,
    );
    out.push(performance.now() - t);
  }
  return out;
}

type Measured = { lat: number[]; perSec: number };

function line(label: string, m: Measured | undefined, extra = ''): string {
  const x = summary(m?.lat ?? []);
  return `${label.padEnd(64)} p50 ${ms(x.p50).padStart(8)}  p99 ${ms(x.p99).padStart(8)}  ${(m?.perSec ?? 0).toFixed(0).padStart(4)}/s${extra}`;
}

/** The bash lines: new and old path, a new connection per call, and the task-Run ratios of both paths. */
function bashReport(calls: Record<string, Measured>, tasks: Record<string, number[]>, bp: number): string[] {
  const t = summary(tasks.bash ?? []);
  const warm = summary(calls.bash?.lat ?? []);
  const sub = summary(calls['bash-hop']?.lat ?? []);
  const fresh = summary(calls['bash-fresh']?.lat ?? []);
  const bareFresh = summary(calls['bare-fresh']?.lat ?? []);
  return [
    line(
      'bash old path (gateway -> Runtime Server -> worker)',
      calls['bash-hop'],
      `  ${ratio(sub.p50, bp)} bare-process`,
    ),
    line(
      'bash new path (gateway -> the worker holding the channel)',
      calls.bash,
      `  ${ratio(warm.p50, bp)} bare-process`,
    ),
    `bash new / old p50 ${ratio(warm.p50, sub.p50)}; p99 ${ratio(warm.p99, sub.p99)}`,
    `bash same work as a task Run (create -> Succeeded)  p50 ${ms(t.p50)}  p99 ${ms(t.p99)}`,
    `bash task Run / call p50: new path ${ratio(t.p50, warm.p50)}, old path ${ratio(t.p50, sub.p50)}`,
    line('bare HTTPS echo (separate process), a new TLS connection per call', calls['bare-fresh']),
    line('bash new path, a new TLS connection to the gateway per call', calls['bash-fresh']),
    `new connection per call: bash call / bare p50 ${ratio(fresh.p50, bareFresh.p50)}; task Run / bash call p50 ${ratio(t.p50, fresh.p50)}`,
  ];
}

/** The latency spread of the calls (p10, p25, p50, p75, p90) over the separate-process echo's p50: a bimodal one shows. */
function spread(calls: Record<string, Measured>, bp: number): string {
  const q = (name: string): string =>
    [10, 25, 50, 75, 90].map((p) => (percentile(calls[name]?.lat ?? [], p) / bp).toFixed(2)).join('/');
  return `spread (p10/p25/p50/p75/p90 ÷ bare-process p50): bare-process ${q('bare-process')}; python ${q('python')}; bash ${q('bash')}`;
}

function report(calls: Record<string, Measured>, tasks: Record<string, number[]>): string {
  const b = summary(calls.bare?.lat ?? []);
  const bp = summary(calls['bare-process']?.lat ?? []);
  const hop = summary(calls['python-hop']?.lat ?? []);
  const direct = summary(calls.python?.lat ?? []);
  const lines = [
    `kruntimes function calls: ${CALLS} rounds of one call each (bare, python, python old path, bash, bash old path, fresh connections; interleaved${ROTATE ? ', the order rotated each round' : ''}), payload ${JSON.stringify(PAYLOAD)}; ${TASKS} task Runs per language`,
    `baseline: bare HTTPS round trip, echo in the bench process (keep-alive)  p50 ${ms(b.p50)}  p99 ${ms(b.p99)}  ${calls.bare?.perSec.toFixed(0)}/s`,
    `baseline: bare HTTPS round trip, echo in a separate local process (keep-alive)  p50 ${ms(bp.p50)}  p99 ${ms(bp.p99)}  ${calls['bare-process']?.perSec.toFixed(0)}/s`,
    `python old path (runtimed -> Runtime Server -> worker)  p50 ${ms(hop.p50)}  p99 ${ms(hop.p99)}  ${calls['python-hop']?.perSec.toFixed(0)}/s  ${ratio(hop.p50, b.p50)} bare, ${ratio(hop.p50, bp.p50)} bare-process`,
    `python new path (runtimed -> worker)                    p50 ${ms(direct.p50)}  p99 ${ms(direct.p99)}  ${calls.python?.perSec.toFixed(0)}/s  ${ratio(direct.p50, b.p50)} bare, ${ratio(direct.p50, bp.p50)} bare-process`,
    `python new / old p50 ${ratio(direct.p50, hop.p50)}; p99 ${ratio(direct.p99, hop.p99)}`,
  ];
  lines.push(...bashReport(calls, tasks, bp.p50), spread(calls, bp.p50));
  for (const lang of ['python', 'bash']) {
    const m = calls[lang];
    const f = summary(m?.lat ?? []);
    const t = summary(tasks[lang] ?? []);
    lines.push(
      `${lang} function call through the gateway  p50 ${ms(f.p50)}  p99 ${ms(f.p99)}  ${m?.perSec.toFixed(0)}/s (one Run, one call at a time)`,
      `${lang} same work as a task Run (create -> Succeeded)  p50 ${ms(t.p50)}  p99 ${ms(t.p99)}`,
      `${lang} ratios: call / bare p50 ${ratio(f.p50, b.p50)}; call / bare-process p50 ${ratio(f.p50, bp.p50)}; task Run / call p50 ${ratio(t.p50, f.p50)}`,
    );
  }
  return `${lines.join('\n')}\n`;
}

async function main(): Promise<void> {
  const root = join(REPO_ROOT, '.kruntimes', 'bench', `functions-${process.pid}`);
  const env = await up({ root, ...(process.env.KRT_BIN_DIR ? { binDir: process.env.KRT_BIN_DIR } : {}) });
  const bare = await bareEcho();
  const bareProc = await bareEcho(true);
  try {
    const token = await functionRuns(env.admin, NS, FNS);
    const ep: Record<string, InvokeEndpoint> = {};
    for (const { name } of FNS) ep[name] = await endpointOf(env.admin, NS, `fn-${name}`);
    const calls = await interleaved(
      CALLS,
      {
        bare: bare.call,
        'bare-process': bareProc.call,
        python: () => invokeEndpoint(ep.python as InvokeEndpoint, token, PAYLOAD),
        'python-hop': () => invokeEndpoint(ep['python-hop'] as InvokeEndpoint, token, PAYLOAD),
        bash: () => invokeEndpoint(ep.bash as InvokeEndpoint, token, PAYLOAD),
        'bash-hop': () => invokeEndpoint(ep['bash-hop'] as InvokeEndpoint, token, PAYLOAD),
        'bare-fresh': () => bareProc.fresh(),
        'bash-fresh': () => invokeFresh(ep.bash as InvokeEndpoint, token),
      },
      20,
      ROTATE,
    );
    const tasks: Record<string, number[]> = {};
    for (const lang of ['python', 'bash'] as const) tasks[lang] = await taskRuns(env.admin, lang, TASKS);
    process.stdout.write(report(calls, tasks));
  } finally {
    bare.close();
    bareProc.close();
    closeInvokeAgents();
    env.admin.close();
    if (process.env.BENCH_KEEP !== '1') await down(root, { purge: true });
  }
}

await main();
