/**
 * runtimed's Prometheus registry (the Runtime Gateway's metrics, gateway-metrics.ts), loaded when
 * first needed: prom-client costs several MiB per process, and most Runtime Pods never serve a
 * function call. It loads with the first function Run's endpoint, the first gateway request or
 * the first /metrics scrape; until then every metric is zero, which /metrics then shows.
 */
import type { GatewayMetrics } from './gateway-metrics.ts';

export class LazyMetrics {
  /** The metrics once loaded. */
  current: GatewayMetrics | undefined;
  private loading: Promise<GatewayMetrics> | undefined;

  /** Wraps metrics that are already there (tests). */
  static of(m: GatewayMetrics): LazyMetrics {
    const l = new LazyMetrics();
    l.current = m;
    l.loading = Promise.resolve(m);
    return l;
  }

  load(): Promise<GatewayMetrics> {
    this.loading ??= import('./gateway-metrics.ts').then((m) => (this.current = new m.GatewayMetrics()));
    return this.loading;
  }

  /** Runs f with the metrics now, or once they have loaded. */
  use(f: (m: GatewayMetrics) => void): void {
    if (this.current) f(this.current);
    else void this.load().then(f);
  }
}
