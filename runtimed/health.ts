/**
 * runtimed's health port: /healthz (liveness), /readyz (readiness) and /metrics. It listens from
 * the first moment of runtimed's start, so the Pod's readiness probe reaches it while runtimed is
 * still starting; what it answers is as before the port opened early:
 * - /healthz: 200 once runtimed has started, 503 while it starts;
 * - /readyz: 200 once runtimed has started (it watches its Runs, its heartbeat is published, its
 *   session and gateway ports listen) and the Runtime Server answers on its socket; 503 otherwise.
 *   A probe that arrives while runtimed starts is held until the start ends or for holdMs, whichever
 *   is first: the Pod turns Ready when runtimed can run a Run, not at the probe period's next tick.
 */
import http from 'node:http';
import type { LazyMetrics } from './lazy-metrics.ts';

/** Below the probe's timeout (timeoutSeconds, 1 s by default on the kubelet and the node agent). */
export const READY_HOLD_MS = 800;

/** Opened once runtimed has started; /healthz and /readyz wait on it. */
export class StartGate {
  private done = false;
  private release: () => void = () => undefined;
  readonly opened = new Promise<void>((r) => {
    this.release = r;
  });

  get isOpen(): boolean {
    return this.done;
  }

  open(): void {
    this.done = true;
    this.release();
  }
}

export interface HealthDeps {
  address: string;
  port: number;
  gate: StartGate;
  /** The Runtime Server answers on its socket. */
  runtimeHealthy: () => Promise<boolean>;
  /** runtimed's registry, loaded by the first scrape when nothing loaded it before. */
  metrics: LazyMetrics;
  holdMs?: number;
}

/** Waits for the gate at most holdMs; true when it is open. */
function opened(gate: StartGate, holdMs: number): Promise<boolean> {
  if (gate.isOpen) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), holdMs);
    void gate.opened.then(() => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

async function readyz(d: HealthDeps, res: http.ServerResponse): Promise<void> {
  if (!(await opened(d.gate, d.holdMs ?? READY_HOLD_MS))) {
    res.statusCode = 503;
    res.end('runtimed is starting');
    return;
  }
  const ok = await d.runtimeHealthy();
  res.statusCode = ok ? 200 : 503;
  res.end(ok ? 'ok' : 'runtime server not healthy');
}

function handler(d: HealthDeps): http.RequestListener {
  return (req, res) => {
    if (req.url === '/healthz') {
      res.statusCode = d.gate.isOpen ? 200 : 503;
      res.end(d.gate.isOpen ? 'ok' : 'runtimed is starting');
      return;
    }
    if (req.url === '/metrics') {
      void d.metrics.load().then(async ({ registry }) => {
        const text = await registry.metrics();
        res.setHeader('Content-Type', registry.contentType);
        res.end(text);
      });
      return;
    }
    if (req.url === '/readyz') {
      void readyz(d, res);
      return;
    }
    res.statusCode = 404;
    res.end();
  };
}

export async function serveHealth(d: HealthDeps): Promise<http.Server> {
  const srv = http.createServer(handler(d));
  await new Promise<void>((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(d.port, d.address, () => resolve());
  });
  return srv;
}
