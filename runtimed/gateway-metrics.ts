/** Prometheus metrics of the Runtime Gateway (issue 15), on runtimed's registry, served at /metrics. */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

export class GatewayMetrics {
  readonly registry = new Registry();

  readonly invocations = new Counter({
    name: 'kruntimes_gateway_invocations_total',
    help: 'Requests to the Runtime Gateway by HTTP status code (200 answered, 401/403 refused, 404/429/503 not callable, 500/502 function errors)',
    labelNames: ['code'],
    registers: [this.registry],
  });

  readonly duration = new Histogram({
    name: 'kruntimes_gateway_invocation_duration_seconds',
    help: 'Time from a request reaching the Runtime Gateway to its answer, by HTTP status code',
    labelNames: ['code'],
    registers: [this.registry],
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  });

  readonly inflight = new Gauge({
    name: 'kruntimes_gateway_inflight_requests',
    help: 'Requests the Runtime Gateway is handling now',
    registers: [this.registry],
  });

  readonly reviews = new Counter({
    name: 'kruntimes_gateway_authorization_reviews_total',
    help: 'Authorization reviews the gateway asked the API server for (cache misses), by result',
    labelNames: ['result'],
    registers: [this.registry],
  });
}
