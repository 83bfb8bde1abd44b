/**
 * Dashboard soak (not a test), issue 16 "a page left open for an hour neither leaks memory nor
 * drops updates", accelerated: own local environment, `krt dashboard` as its own process whose
 * API server connection goes through a TCP proxy here, its Runs page open in headless Debian
 * chromium, then for SOAK_SECONDS:
 *   - SOAK_RUNS Runs updated as fast as SOAK_CONCURRENCY writers go (a label patch: every update
 *     is a new resourceVersion the page must end up showing), some deleted and created again;
 *   - every SOAK_DROP_MS all the dashboard's API server connections are cut (its watches resume
 *     from their resourceVersion or relist);
 *   - every SOAK_NAV_MS the page switches tab and back (its EventSources close and reopen: the
 *     server stops and starts its watches); every 10th time through the namespace list, which
 *     closes the Runs stream too (the others live through many cuts);
 *   - the page's clock (Playwright's: Date, timers, animation frames) jumps one minute forward
 *     SOAK_PAGE_MINUTES (60) times spread over the run, so the page lives through an hour of its
 *     own time (ages, durations, its flush timers) while the updates keep coming.
 * Then: dropped updates (Runs whose row does not show the API server's final resourceVersion, or
 * missing/extra rows, once quiet), the page's JS heap after GC and the server's RSS, before/after.
 *   npx tsx bench/dashboard-soak.ts
 */
import type { ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import type { Env } from '../localenv/environment.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import {
  benchMain,
  heapMiB,
  rssMiB,
  signIn,
  startKrtDashboard,
  withDashboardBench,
  type DashboardBench,
} from './dashboard-util.ts';

const SECONDS = Number(process.env.SOAK_SECONDS ?? '180');
const RUNS = Number(process.env.SOAK_RUNS ?? '100');
const CONC = Number(process.env.SOAK_CONCURRENCY ?? '8');
const DROP_MS = Number(process.env.SOAK_DROP_MS ?? '3000');
const NAV_MS = Number(process.env.SOAK_NAV_MS ?? '1500');
const PAGE_MINUTES = Number(process.env.SOAK_PAGE_MINUTES ?? '60');
const NS = 'bench-soak';
const RUNS_PATH = `/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runs`;

const run = (name: string): object => ({
  apiVersion: 'kruntimes.io/v1alpha1',
  kind: 'Run',
  metadata: { name },
  // A Runtime that does not exist: the Run stays pending, only this script writes it.
  spec: { runtime: 'absent', source: { inline: 'true' } },
});

/** A TCP proxy to `target` that can cut every connection through it. */
async function cuttingProxy(target: URL): Promise<{ port: number; cut: () => number; close: () => void }> {
  const pairs = new Set<[net.Socket, net.Socket]>();
  const srv = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    const pair: [net.Socket, net.Socket] = [client, upstream];
    pairs.add(pair);
    for (const s of pair) {
      s.on('close', () => pairs.delete(pair));
      s.on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return {
    port: (srv.address() as net.AddressInfo).port,
    cut: () => {
      const n = pairs.size;
      for (const pair of pairs) for (const s of pair) s.destroy();
      pairs.clear();
      return n;
    },
    close: () => srv.close(),
  };
}

/** The kubeconfig with its server replaced by the proxy (the API server's certificate names 127.0.0.1). */
function proxiedKubeconfig(env: Env, port: number): string {
  const file = join(env.state.root, `soak-${process.pid}.kubeconfig`);
  const text = readFileSync(env.kubeconfig, 'utf8').replace(
    /server: https:\/\/127\.0\.0\.1:\d+/,
    `server: https://127.0.0.1:${port}`,
  );
  writeFileSync(file, text, { mode: 0o600 });
  return file;
}

interface Counters {
  updates: number;
  recreated: number;
  drops: number;
  navigations: number;
  pageMinutes: number;
}

async function writers(env: Env, until: number, c: Counters): Promise<void> {
  let seq = 0;
  await Promise.all(
    Array.from({ length: CONC }, async () => {
      while (Date.now() < until) {
        const i = seq++;
        const name = `soak-${i % RUNS}`;
        if (i % 97 === 0) {
          await env.admin.delete(`${RUNS_PATH}/${name}`).catch(() => undefined);
          await env.admin.create(RUNS_PATH, run(name)).catch(() => undefined);
          c.recreated++;
          continue;
        }
        await env.admin
          .patch(`${RUNS_PATH}/${name}`, { metadata: { labels: { 'soak-seq': String(i) } } })
          .then(() => c.updates++)
          .catch(() => undefined);
      }
    }),
  );
}

/** Tab switches (the Runtimes tab's streams close and reopen); every 10th through the namespace list (the Runs stream too). */
async function navigator(page: Page, until: number, c: Counters): Promise<void> {
  while (Date.now() < until) {
    await new Promise((r) => setTimeout(r, NAV_MS));
    await page.evaluate(`location.hash = '${c.navigations % 10 === 9 ? '#/' : `#/ns/${NS}/runtimes`}'`);
    await page.evaluate(`location.hash = '#/ns/${NS}/runs'`);
    c.navigations++;
  }
}

/** Moves the page's clock one minute forward PAGE_MINUTES times, evenly over the run. */
async function pageHour(page: Page, until: number, c: Counters): Promise<void> {
  const step = (until - Date.now()) / (PAGE_MINUTES + 1);
  while (c.pageMinutes < PAGE_MINUTES && Date.now() + step < until) {
    await new Promise((r) => setTimeout(r, step));
    await page.clock.fastForward('01:00');
    c.pageMinutes++;
  }
  // What the waits' overhead left over, in one jump at the end: the page lives the whole hour.
  const left = PAGE_MINUTES - c.pageMinutes;
  if (left > 0) await page.clock.fastForward(left * 60_000);
  c.pageMinutes += Math.max(0, left);
}

/** Runs whose row is missing, extra, or shows another resourceVersion than the API server's. */
async function mismatches(env: Env, page: Page): Promise<{ missing: number; extra: number; stale: number }> {
  const truth = new Map(
    (await env.admin.list<KubeObject>(RUNS_PATH)).items.map((r) => [r.metadata.name ?? '', r.metadata.resourceVersion]),
  );
  const shown = new Map<string, string>(
    await page.evaluate<[string, string][]>(
      `[...document.querySelectorAll('tr[data-run]')].map((tr) => [tr.dataset.run, tr.dataset.rv])`,
    ),
  );
  let missing = 0;
  let stale = 0;
  for (const [name, rv] of truth) {
    if (!shown.has(name)) missing++;
    else if (shown.get(name) !== rv) stale++;
  }
  const extra = [...shown.keys()].filter((n) => !truth.has(n)).length;
  return { missing, extra, stale };
}

async function settle(env: Env, page: Page): Promise<{ missing: number; extra: number; stale: number }> {
  const end = Date.now() + 15_000;
  let m = await mismatches(env, page);
  while (m.missing + m.extra + m.stale > 0 && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 250));
    m = await mismatches(env, page);
  }
  return m;
}

async function soak(env: Env, page: Page, dashboard: ChildProcess, proxy: { cut: () => number }): Promise<void> {
  for (let i = 0; i < RUNS; i += 20)
    await Promise.all(
      Array.from({ length: Math.min(20, RUNS - i) }, (_, k) => env.admin.create(RUNS_PATH, run(`soak-${i + k}`))),
    );
  await page.waitForFunction(`document.querySelectorAll('tr[data-run]').length >= ${RUNS}`, undefined, {
    timeout: 60_000,
  });
  const before = { rss: rssMiB(dashboard.pid ?? 0), heap: await heapMiB(page) };
  const c: Counters = { updates: 0, recreated: 0, drops: 0, navigations: 0, pageMinutes: 0 };
  const until = Date.now() + SECONDS * 1000;
  const cutter = setInterval(() => (c.drops += proxy.cut()), DROP_MS);
  const t0 = performance.now();
  await Promise.all([writers(env, until, c), navigator(page, until, c), pageHour(page, until, c)]);
  clearInterval(cutter);
  const m = await settle(env, page);
  const after = { rss: rssMiB(dashboard.pid ?? 0), heap: await heapMiB(page) };
  const secs = (performance.now() - t0) / 1000;
  const skew = ((await page.evaluate<number>('Date.now()')) - Date.now()) / 60_000;
  process.stdout.write(
    `soak ${secs.toFixed(0)} s on ${RUNS} Runs: ${c.updates} updates (${(c.updates / secs).toFixed(0)}/s), ${c.recreated} deletes+creates, ${c.drops} API server connections of the dashboard cut, ${c.navigations} tab switches (EventSources closed and reopened), the page's clock ${skew.toFixed(0)} min ahead of real time (${c.pageMinutes} one-minute jumps)\n` +
      `dropped updates once quiet: ${m.stale} stale rows, ${m.missing} missing, ${m.extra} extra\n` +
      `page JS heap after GC ${before.heap.toFixed(1)} → ${after.heap.toFixed(1)} MiB; dashboard server RSS ${before.rss.toFixed(0)} → ${after.rss.toFixed(0)} MiB\n`,
  );
}

async function bench(b: DashboardBench): Promise<void> {
  const { env, browser } = b;
  const proxy = await cuttingProxy(new URL(env.server));
  try {
    await env.admin.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    const dashboard = await startKrtDashboard(b, proxiedKubeconfig(env, proxy.port), NS);
    const page = await (await browser.newContext()).newPage();
    // The page's own time is Playwright's from the start: pageHour moves it an hour forward.
    await page.clock.install();
    await signIn(page, dashboard.loginUrl, `#/ns/${NS}/runs`);
    await soak(env, page, dashboard.process, proxy);
  } finally {
    proxy.close();
  }
}

benchMain(() => withDashboardBench('dashboard-soak', bench));
