/**
 * Function-mode benchmark (not a test, issue 15): calls of a trivial bash and python handler on
 * Ready function Runs through the Runtime Gateway (HTTPS keep-alive, Bearer token, cached
 * authorization -> runtimed -> Runtime Server), one at a time; next to, in the same run, a bare
 * HTTPS round trip to a local process (keep-alive, JSON echo) and the same work as task Runs
 * (create -> Succeeded, client-observed).
 *   npx tsx bench/functions.ts           # BENCH_CALLS=300 calls per handler, BENCH_TASKS=20 task Runs
 */
import { createServer, request, Agent } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { down, up } from '../localenv/environment.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import { createCa, issueServing } from '../lib/tls/certs.ts';
import type { KubeClient } from '../lib/kube/client.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { closeInvokeAgents, endpointOf, invokeEndpoint, type InvokeEndpoint } from '../lib/invoke/client.ts';
import { ms, ratio, summary } from './stats.ts';

const CALLS = Number(process.env.BENCH_CALLS ?? '300');
const TASKS = Number(process.env.BENCH_TASKS ?? '20');
const NS = 'bench';
const G = `/apis/kruntimes.io/v1alpha1/namespaces/${NS}`;
type Run = KubeObject & { status?: { phase?: string } };
const IMAGES = { bash: 'ghcr.io/kruntimes/bash-runtime:v0.0.3', python: 'ghcr.io/kruntimes/python-runtime:v0.0.3' };
const PAYLOAD = { n: 1, s: 'hello' };

async function until<T>(f: () => Promise<T | undefined>): Promise<T> {
  for (;;) {
    const v = await f().catch(() => undefined);
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 20));
  }
}

const runtime = (name: 'bash' | 'python'): object => ({
  apiVersion: 'kruntimes.io/v1alpha1',
  kind: 'Runtime',
  metadata: { name },
  spec: {
    replicas: 1,
    capacity: { resources: { runs: '4' } },
    template: {
      spec: { containers: [{ name: 'runtime', image: IMAGES[name], args: ['--port=9091', '--work-dir=/workspace'] }] },
    },
  },
});

const FUNCTIONS = {
  bash: { handler: 'echo.echo', source: { inlinePath: 'echo.sh', inline: 'echo() { printf "%s" "$1"; }\n' } },
  python: { handler: 'fns.echo.echo', source: { inlinePath: 'fns/echo.py', inline: 'def echo(p):\n    return p\n' } },
};
const TASK = {
  bash: { inline: `printf '%s' '${JSON.stringify(PAYLOAD)}'\n` },
  python: { inline: `import json\nprint(json.dumps(${JSON.stringify(PAYLOAD)}))\n` },
};

/** Namespace, Runtimes, both function Runs Ready, and a caller token allowed to get Runs. */
async function setup(api: KubeClient): Promise<string> {
  await api.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
  for (const lang of ['bash', 'python'] as const) {
    await api.create(`${G}/runtimes`, runtime(lang));
    await api.create(`${G}/runs`, {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'Run',
      metadata: { name: `fn-${lang}` },
      spec: { runtime: lang, mode: { function: { handler: FUNCTIONS[lang].handler } }, source: FUNCTIONS[lang].source },
    });
  }
  await api.create(`/api/v1/namespaces/${NS}/serviceaccounts`, {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: { name: 'caller' },
  });
  await api.create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/rolebindings`, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'caller' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
    subjects: [{ kind: 'ServiceAccount', name: 'caller', namespace: NS }],
  });
  const tok = await api.create<KubeObject & { status: { token: string } }>(
    `/api/v1/namespaces/${NS}/serviceaccounts/caller/token`,
    { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } },
  );
  for (const lang of ['bash', 'python'])
    await until(async () =>
      (await api.get<Run>(`${G}/runs/fn-${lang}`)).status?.phase === 'Ready' ? true : undefined,
    );
  return tok.status.token;
}

async function timed(n: number, f: () => Promise<unknown>): Promise<{ lat: number[]; perSec: number }> {
  await f(); // warm: connection, cached review
  const lat: number[] = [];
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await f();
    lat.push(performance.now() - t);
  }
  return { lat, perSec: (n / (performance.now() - t0)) * 1000 };
}

/** A bare HTTPS JSON echo on localhost, called with keep-alive: the floor of any HTTPS call. */
async function bareRoundTrip(n: number): Promise<{ lat: number[]; perSec: number }> {
  const now = new Date();
  const ca = await createCa('bench-ca', now, 1);
  const pair = await issueServing(ca, 'bench', { dns: [], ips: ['127.0.0.1'] }, now, 1);
  const srv = createServer({ cert: pair.cert, key: pair.key }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.stringify(JSON.parse(Buffer.concat(chunks).toString()));
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
      res.end(body);
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as AddressInfo).port;
  const agent = new Agent({ keepAlive: true, ca: ca.cert });
  const body = JSON.stringify(PAYLOAD);
  const call = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, method: 'POST', agent, path: '/' }, (res) => {
        res.resume();
        res.on('end', () => resolve());
      });
      req.on('error', reject);
      req.end(body);
    });
  try {
    return await timed(n, call);
  } finally {
    agent.destroy();
    srv.close();
  }
}

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

function report(
  bare: { lat: number[]; perSec: number },
  rows: { lang: string; fn: { lat: number[]; perSec: number }; task: number[] }[],
): string {
  const b = summary(bare.lat);
  const lines = [
    `kruntimes function calls: ${CALLS} sequential calls per handler (payload ${JSON.stringify(PAYLOAD)}), ${TASKS} task Runs per language`,
    `baseline: bare HTTPS round trip to a local process (keep-alive)  p50 ${ms(b.p50)}  p99 ${ms(b.p99)}  ${bare.perSec.toFixed(0)}/s`,
  ];
  for (const r of rows) {
    const f = summary(r.fn.lat);
    const t = summary(r.task);
    lines.push(
      `${r.lang} function call through the gateway  p50 ${ms(f.p50)}  p99 ${ms(f.p99)}  ${r.fn.perSec.toFixed(0)}/s (one Run, one call at a time)`,
      `${r.lang} same work as a task Run (create -> Succeeded)  p50 ${ms(t.p50)}  p99 ${ms(t.p99)}`,
      `${r.lang} ratios: call / bare p50 ${ratio(f.p50, b.p50)}; task Run / call p50 ${ratio(t.p50, f.p50)}`,
    );
  }
  return `${lines.join('\n')}\n`;
}

async function main(): Promise<void> {
  const root = join(REPO_ROOT, '.kruntimes', 'bench', `functions-${process.pid}`);
  const env = await up({ root, ...(process.env.KRT_BIN_DIR ? { binDir: process.env.KRT_BIN_DIR } : {}) });
  try {
    const token = await setup(env.admin);
    const bare = await bareRoundTrip(CALLS);
    const rows = [];
    for (const lang of ['bash', 'python'] as const) {
      const ep: InvokeEndpoint = await endpointOf(env.admin, NS, `fn-${lang}`);
      const fn = await timed(CALLS, () => invokeEndpoint(ep, token, PAYLOAD));
      rows.push({ lang, fn, task: await taskRuns(env.admin, lang, TASKS) });
    }
    process.stdout.write(report(bare, rows));
  } finally {
    closeInvokeAgents();
    env.admin.close();
    if (process.env.BENCH_KEEP !== '1') await down(root, { purge: true });
  }
}

await main();
