import assert from 'node:assert/strict';
import http from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import pino from 'pino';
import type { KubeClient } from '../lib/kube/client.ts';
import { loadRuntimedConfig } from './config.ts';
import { startDaemon } from './daemon.ts';
import type { Finisher } from './finish.ts';
import { serveHealth, StartGate } from './health.ts';
import { LazyMetrics } from './lazy-metrics.ts';
import type { RuntimeClient } from './runtime-client.ts';

function get(port: number, path: string): Promise<{ code: number; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ code: res.statusCode ?? 0, body }));
      })
      .on('error', reject);
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

describe('runtimed health port (issue 17)', () => {
  let srv: http.Server;
  let gate: StartGate;
  let healthy = true;
  const port = (): number => (srv.address() as AddressInfo).port;
  beforeEach(async () => {
    gate = new StartGate();
    srv = await serveHealth({
      address: '127.0.0.1',
      port: 0,
      gate,
      runtimeHealthy: () => Promise.resolve(healthy),
      metrics: new LazyMetrics(),
      holdMs: 60_000,
    });
  });
  afterEach(() => srv.close());

  it('answers /healthz 503 while runtimed starts and 200 once it has started', async () => {
    assert.deepEqual(await get(port(), '/healthz'), { code: 503, body: 'runtimed is starting' });
    gate.open();
    assert.deepEqual(await get(port(), '/healthz'), { code: 200, body: 'ok' });
  });

  it('holds a readiness probe that arrives during the start and answers it as soon as the start ends', async () => {
    // holdMs is a minute: the probe is answered because the gate opened, not because the hold ran out.
    srv.once('request', () => setImmediate(() => gate.open()));
    assert.deepEqual(await get(port(), '/readyz'), { code: 200, body: 'ok' });
  });

  it('answers a held probe 503 when the start has not ended within the hold', async () => {
    srv.close();
    srv = await serveHealth({
      address: '127.0.0.1',
      port: 0,
      gate,
      runtimeHealthy: () => Promise.resolve(true),
      metrics: new LazyMetrics(),
      holdMs: 1,
    });
    assert.deepEqual(await get(port(), '/readyz'), { code: 503, body: 'runtimed is starting' });
  });

  it('serves the gateway metrics at /metrics, loading them with the first scrape', async () => {
    const r = await get(port(), '/metrics');
    assert.equal(r.code, 200);
    assert.match(r.body, /^kruntimes_gateway_inflight_requests 0$/m);
  });

  it('once started, /readyz follows the Runtime Server: 503 when it does not answer', async () => {
    gate.open();
    healthy = false;
    assert.deepEqual(await get(port(), '/readyz'), { code: 503, body: 'runtime server not healthy' });
    healthy = true;
    assert.deepEqual(await get(port(), '/readyz'), { code: 200, body: 'ok' });
  });
});

describe('runtimed start order (issue 17)', () => {
  it('listens on the health port before it waits for the Runtime Server, answering not ready', async () => {
    const healthPort = await freePort();
    const cfg = loadRuntimedConfig({
      POD_NAME: 'p',
      POD_UID: 'u',
      POD_NAMESPACE: 'ns',
      KRT_RUNTIME: 'rt',
      POD_IP: '127.0.0.1',
      KRT_HEALTH_PORT: String(healthPort),
      KRT_SESSION_PORT: '0',
      KRT_GATEWAY_PORT: '0',
    });
    const seen: { code: number; body: string }[] = [];
    // The Runtime Server's first health check: what the health port answers at that moment, then
    // the start is abandoned (the check throws), so nothing reaches the (absent) API server.
    const runtime = {
      channel: {},
      health: async (): Promise<boolean> => {
        seen.push(await get(healthPort, '/healthz'), await get(healthPort, '/readyz'));
        throw new Error('test: stop the start here');
      },
    } as unknown as RuntimeClient;
    await assert.rejects(
      startDaemon({
        client: {} as KubeClient,
        cfg,
        runtime,
        finisher: {} as Finisher,
        log: pino({ level: 'silent' }),
        readyHoldMs: 1,
      }),
      /stop the start here/,
    );
    assert.deepEqual(seen, [
      { code: 503, body: 'runtimed is starting' },
      { code: 503, body: 'runtimed is starting' },
    ]);
    // What the failed start opened is closed again: the port is free.
    await assert.rejects(get(healthPort, '/healthz'), /ECONNREFUSED/);
  });
});
