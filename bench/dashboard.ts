/**
 * Dashboard benchmark (not a test), issue 16. Own local environment, `krt dashboard` as its own
 * process (the admin kubeconfig), its Runs page open in headless Debian chromium, and
 * `kubectl get runs -w` running next to it in the same run:
 *   1. Latency: BENCH_RUNS Runs (`echo`) one after another; for each, the time from a plain watch
 *      client in this process receiving the Run's terminal status (what the API server sends every
 *      watcher: the common reference) to (a) the page showing the phase (a MutationObserver in the
 *      browser calls back into this process) and (b) kubectl printing the line.
 *   2. Memory: BENCH_OBJECTS (1,000) more Runs in the namespace (pending: their Runtime does not
 *      exist), the page showing them all; RSS of the dashboard server and of kubectl.
 *   npx tsx bench/dashboard.ts
 */
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import type { Env } from '../localenv/environment.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { ListWatch } from '../lib/kube/watch.ts';
import { benchRuntime } from './runtime.ts';
import {
  benchMain,
  heapMiB,
  rssMiB,
  signIn,
  startKrtDashboard,
  startProcess,
  withDashboardBench,
  type DashboardBench,
} from './dashboard-util.ts';
import { ms, ratio, summary } from './stats.ts';

const RUNS = Number(process.env.BENCH_RUNS ?? '30');
const OBJECTS = Number(process.env.BENCH_OBJECTS ?? '1000');
const NS = 'bench-dash';
const RUNS_PATH = `/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runs`;
const TERMINAL = ['Succeeded', 'Failed', 'Cancelled', 'Timeout'];
type Run = KubeObject & { status?: { phase?: string } };

/** First-seen times (performance.now) of each Run's terminal phase, per observer. */
type Seen = Map<string, number>;
const mark = (seen: Seen, name: string): void => {
  if (!seen.has(name)) seen.set(name, performance.now());
};

/** Browser-side (plain JavaScript, no DOM types here): reports each row's terminal phase. */
const OBSERVER = `(() => {
  const terminal = TERMINAL;
  const reported = new Set();
  const check = () => {
    for (const el of document.querySelectorAll('tr[data-run] [data-phase]')) {
      const name = el.closest('tr').dataset.run;
      if (terminal.includes(el.dataset.phase) && !reported.has(name)) {
        reported.add(name);
        window.krtSeen(name);
      }
    }
  };
  window.krtObserver = new MutationObserver(check);
  window.krtObserver.observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
})()`;

/** The Runs page, reporting each Run's terminal phase to `seen` as the DOM shows it. */
async function openRunsPage(page: Page, loginUrl: string, seen: Seen): Promise<void> {
  await page.exposeFunction('krtSeen', (name: string) => mark(seen, name));
  await signIn(page, loginUrl, `#/ns/${NS}/runs`);
  await page.waitForSelector('main');
  await page.evaluate(OBSERVER.replace('TERMINAL', JSON.stringify(TERMINAL)));
}

async function waitFor(what: string, ok: () => boolean, timeoutMs = 60_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function setup(env: Env): Promise<void> {
  await env.admin.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
  await env.admin.create(`/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runtimes`, benchRuntime('bash', 1, 8));
  for (;;) {
    const pods = await env.admin.list<KubeObject & { status?: { conditions?: { type: string; status: string }[] } }>(
      `/api/v1/namespaces/${NS}/pods`,
      { labelSelector: 'runtime=bash' },
    );
    if (pods.items.some((p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

const run = (name: string, runtime: string): object => ({
  apiVersion: 'kruntimes.io/v1alpha1',
  kind: 'Run',
  metadata: { name },
  spec: { runtime, source: { inline: 'echo ok' } },
});

interface Observers {
  ref: Seen;
  page: Seen;
  kubectl: Seen;
}

async function latency(env: Env, o: Observers): Promise<void> {
  for (let i = 0; i < RUNS; i++) {
    const name = `lat-${i}`;
    await env.admin.create(RUNS_PATH, run(name, 'bash'));
    await waitFor(`${name} on every observer`, () => [o.ref, o.page, o.kubectl].every((s) => s.has(name)));
  }
  const delays = (s: Seen): number[] => [...o.ref].flatMap(([n, t]) => (s.has(n) ? [(s.get(n) ?? t) - t] : []));
  const page = summary(delays(o.page));
  const kubectl = summary(delays(o.kubectl));
  process.stdout.write(
    `terminal status → shown (${RUNS} Runs), after a plain watch client receives it: dashboard page p50 ${ms(page.p50)} p95 ${ms(page.p95)}; kubectl get runs -w p50 ${ms(kubectl.p50)} p95 ${ms(kubectl.p95)} (p50 ratio ${ratio(page.p50, kubectl.p50)})\n`,
  );
}

/**
 * Waits (≤ 240 s) for the page to show `n` rows; every 10 s a progress line on stderr: rows, SSE
 * messages received, and the page's main-thread script and layout time (is the page keeping up?).
 */
async function showAll(page: Page, n: number, since: number): Promise<number | undefined> {
  const cdp = await page.context().newCDPSession(page);
  let sse = 0;
  cdp.on('Network.eventSourceMessageReceived', () => sse++);
  await cdp.send('Network.enable');
  await cdp.send('Performance.enable');
  const busy = async (): Promise<string> => {
    const { metrics } = await cdp.send('Performance.getMetrics');
    const m = (k: string): number => metrics.find((x) => x.name === k)?.value ?? NaN;
    return `script ${m('ScriptDuration').toFixed(1)} s, layout ${m('LayoutDuration').toFixed(1)} s, style ${m('RecalcStyleDuration').toFixed(1)} s`;
  };
  let next = performance.now() + 10_000;
  try {
    while (performance.now() - since < 240_000) {
      const rows = await page.evaluate<number>(`document.querySelectorAll('tr[data-run]').length`);
      if (rows >= n) return performance.now();
      if (performance.now() > next) {
        next += 10_000;
        process.stderr.write(
          `  +${((performance.now() - since) / 1000).toFixed(0)} s: ${rows}/${n} rows, ${sse} SSE messages, ${await busy()}\n`,
        );
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    return undefined;
  } finally {
    await cdp.detach();
  }
}

async function memory(env: Env, page: Page, dashboard: ChildProcess, kubectl: ChildProcess): Promise<void> {
  // The latency observer is done: it would only add work to every render from here on.
  await page.evaluate('window.krtObserver.disconnect()');
  const before = { dash: rssMiB(dashboard.pid ?? 0), kubectl: rssMiB(kubectl.pid ?? 0), heap: await heapMiB(page) };
  const names = Array.from({ length: OBJECTS }, (_, i) => `obj-${i}`);
  const t0 = performance.now();
  for (let i = 0; i < names.length; i += 20)
    await Promise.all(names.slice(i, i + 20).map((n) => env.admin.create(RUNS_PATH, run(n, 'absent'))));
  const created = performance.now();
  const shownAt = await showAll(page, OBJECTS + RUNS + 1, created);
  const shown = shownAt ?? NaN;
  await new Promise((r) => setTimeout(r, 2000));
  const after = { dash: rssMiB(dashboard.pid ?? 0), kubectl: rssMiB(kubectl.pid ?? 0), heap: await heapMiB(page) };
  for (const [what, p] of [
    ['krt dashboard', dashboard],
    ['kubectl get runs -w', kubectl],
  ] as const)
    if (p.exitCode !== null || p.signalCode !== null)
      process.stdout.write(`${what} exited (${p.exitCode ?? p.signalCode}) before the memory was read\n`);
  process.stdout.write(
    `${OBJECTS} Runs created in ${ms(created - t0)}; the page showed the last of them ${shownAt ? ms(shown - created) : 'NOT within 240 s'} after the last create\n` +
      `RSS with ${OBJECTS + RUNS + 1} Runs in the namespace (before the ${OBJECTS}): dashboard server ${after.dash.toFixed(0)} MiB (${before.dash.toFixed(0)}), kubectl get runs -w ${after.kubectl.toFixed(0)} MiB (${before.kubectl.toFixed(0)}); ratio ${ratio(after.dash, after.kubectl)}; the page's JS heap ${after.heap.toFixed(1)} MiB (${before.heap.toFixed(1)})\n`,
  );
}

async function bench({ env, browser, started }: DashboardBench): Promise<void> {
  const o: Observers = { ref: new Map(), page: new Map(), kubectl: new Map() };
  await setup(env);
  const watch = new ListWatch<Run>(env.admin, { path: RUNS_PATH }, (d) => {
    if (TERMINAL.includes(d.object.status?.phase ?? '')) mark(o.ref, d.object.metadata.name ?? '');
  });
  watch.start();
  await watch.synced;
  const dashboard = await startKrtDashboard({ env, browser, started }, env.kubeconfig, NS);
  const cols = ['-o', 'custom-columns=NAME:.metadata.name,PHASE:.status.phase', '--no-headers'];
  const kubectl = await startProcess(
    join(env.state.binDir, 'kubectl'),
    ['--kubeconfig', env.kubeconfig, '-n', NS, 'get', 'runs', '-w', ...cols],
    undefined,
    (l) => {
      const [name, phase] = l.trim().split(/\s+/);
      if (name && TERMINAL.includes(phase ?? '')) mark(o.kubectl, name);
    },
  );
  started.push(kubectl);
  const page = await (await browser.newContext()).newPage();
  await openRunsPage(page, dashboard.loginUrl, o.page);
  // kubectl prints nothing for an empty namespace: its first line comes with the first Run.
  await env.admin.create(RUNS_PATH, run('warm-up', 'bash'));
  await waitFor('the warm-up Run on every observer', () => [o.ref, o.page, o.kubectl].every((s) => s.has('warm-up')));
  await latency(env, o);
  await memory(env, page, dashboard.process, kubectl);
  watch.stop();
}

benchMain(() => withDashboardBench('dashboard', bench));
