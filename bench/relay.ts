/**
 * Relay benchmark (not a test): event-to-handler latency and handler throughput of the watch
 * relay with 1,000 objects, next to the API server's own write latency in the same run.
 *  - write floor: sequential ConfigMap creates (p50/p95);
 *  - event-to-handler: create sent -> handler invoked, for objects created one by one;
 *  - sync throughput: 1,000 existing objects handled after relay start (no-op handler);
 *  - reconcile throughput: 1,000 objects through sample-echo (one server-side apply each).
 */
import { join } from 'node:path';
import { pino } from 'pino';
import { Relay } from '../apiserver/relay.ts';
import { FnMetrics } from '../lib/fn/metrics.ts';
import { R } from '../lib/fn/resources.ts';
import type { WatchFunction } from '../lib/fn/types.ts';
import echo from '../e2e/fixtures/functions/sample-echo/index.ts';
import { down, up } from '../localenv/environment.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import { ms, ratio, summary } from './stats.ts';

const N = Number(process.env.BENCH_OBJECTS ?? '1000');
const root = join(REPO_ROOT, '.kruntimes', 'bench', `relay-${process.pid}`);
const log = pino({ level: 'warn' });

async function main(): Promise<void> {
  const env = await up({
    root,
    nodes: ['bench-node'],
    install: false,
    ...(process.env.KRT_BIN_DIR ? { binDir: process.env.KRT_BIN_DIR } : {}),
  });
  const api = env.admin;
  try {
    await api.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'bench' } });
    const cm = (name: string, label: string): object => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name, labels: { 'bench/kind': label } },
      data: { v: name },
    });
    const writes: number[] = [];
    for (let i = 0; i < N; i++) {
      const t = performance.now();
      await api.create('/api/v1/namespaces/bench/configmaps', cm(`floor-${i}`, 'floor'));
      writes.push(performance.now() - t);
    }

    const seen = new Map<string, number>();
    const noop: WatchFunction = {
      name: 'bench-noop',
      description: '',
      rbac: [],
      concurrency: 4,
      trigger: { type: 'watch', resource: R.configMaps, labelSelector: 'bench/kind=live' },
      handler: ({ key }) => {
        if (!seen.has(key)) seen.set(key, performance.now());
        return [];
      },
    };
    const syncFn: WatchFunction = {
      ...noop,
      name: 'bench-sync',
      trigger: { ...noop.trigger, labelSelector: 'bench/kind=floor' },
      handler: ({ key }) => {
        seen.set(`sync:${key}`, performance.now());
        return [];
      },
    };
    const tSync = performance.now();
    const relay = new Relay([noop, syncFn], { client: api, log, metrics: new FnMetrics(false) });
    await relay.start();
    while ([...seen.keys()].filter((k) => k.startsWith('sync:')).length < N) await new Promise((r) => setTimeout(r, 5));
    const syncMs = performance.now() - tSync;

    const e2h: number[] = [];
    for (let i = 0; i < N; i++) {
      const t = performance.now();
      await api.create('/api/v1/namespaces/bench/configmaps', cm(`live-${i}`, 'live'));
      while (!seen.has(`bench/live-${i}`)) await new Promise((r) => setImmediate(r));
      e2h.push(seen.get(`bench/live-${i}`)! - t);
    }
    await relay.stop();

    for (let i = 0; i < N; i++)
      await api.patch(`/api/v1/namespaces/bench/configmaps/floor-${i}`, {
        metadata: { labels: { 'kruntimes.io/sample': 'echo' } },
      });
    const tEcho = performance.now();
    const echoRelay = new Relay([echo as WatchFunction], { client: api, log, metrics: new FnMetrics(false) });
    await echoRelay.start();
    for (;;) {
      const replies = await api.list('/api/v1/namespaces/bench/configmaps', {
        labelSelector: 'kruntimes.io/sample=echo-reply',
      });
      if (replies.items.length >= N) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const echoMs = performance.now() - tEcho;
    await echoRelay.stop();

    const w = summary(writes),
      e = summary(e2h);
    process.stdout.write(
      [
        `objects: ${N}`,
        `API server write floor (sequential ConfigMap create): p50 ${ms(w.p50)}  p95 ${ms(w.p95)}`,
        `event-to-handler (create sent -> handler invoked):     p50 ${ms(e.p50)}  p95 ${ms(e.p95)}   ratio to write p50 ${ratio(e.p50, w.p50)}`,
        `initial sync, no-op handler: ${N} objects in ${ms(syncMs)} -> ${(N / (syncMs / 1000)).toFixed(0)} objects/s`,
        `sample-echo (one server-side apply per object): ${N} reconciles in ${ms(echoMs)} -> ${(N / (echoMs / 1000)).toFixed(0)} reconciles/s; write floor alone: ${(1000 / w.p50).toFixed(0)} writes/s sequential`,
        '',
      ].join('\n'),
    );
  } finally {
    api.close();
    await down(root, { purge: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
