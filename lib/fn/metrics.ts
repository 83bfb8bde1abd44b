/** Prometheus metrics of the function hosts, on a private registry, named like controller-runtime's. */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { State, StateGauge } from './types.ts';

export class FnMetrics {
  readonly registry = new Registry();
  readonly reconcileTotal = new Counter({
    name: 'controller_runtime_reconcile_total',
    help: 'Total reconciliations per function and result',
    labelNames: ['controller', 'result'],
    registers: [this.registry],
  });
  readonly reconcileErrors = new Counter({
    name: 'controller_runtime_reconcile_errors_total',
    help: 'Total reconciliation errors per function',
    labelNames: ['controller'],
    registers: [this.registry],
  });
  readonly terminalErrors = new Counter({
    name: 'controller_runtime_terminal_reconcile_errors_total',
    help: 'Terminal reconciliation errors per function',
    labelNames: ['controller'],
    registers: [this.registry],
  });
  readonly reconcileTime = new Histogram({
    name: 'controller_runtime_reconcile_time_seconds',
    help: 'Time per reconciliation',
    labelNames: ['controller'],
    registers: [this.registry],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  });
  readonly queueDepth = new Gauge({
    name: 'workqueue_depth',
    help: 'Current depth of the work queue',
    labelNames: ['name'],
    registers: [this.registry],
  });
  readonly cachedObjects = new Gauge({
    name: 'kruntimes_relay_cached_objects',
    help: 'Objects held in the watch relay caches per resource collection (all informers of it)',
    labelNames: ['resource'],
    registers: [this.registry],
  });
  readonly invocationRounds = new Counter({
    name: 'kruntimes_function_remote_invocations_total',
    help: 'Out-of-process invocations of a watch function per transport, and the rounds they took (reads asked for)',
    labelNames: ['function', 'transport', 'rounds'],
    registers: [this.registry],
  });
  readonly admissionTotal = new Counter({
    name: 'kruntimes_admission_requests_total',
    help: 'Admission requests per function and outcome',
    labelNames: ['function', 'allowed'],
    registers: [this.registry],
  });
  readonly admissionTime = new Histogram({
    name: 'kruntimes_admission_duration_seconds',
    help: 'Admission handler time',
    labelNames: ['function'],
    registers: [this.registry],
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2, 5],
  });

  constructor(defaults = true) {
    if (defaults) collectDefaultMetrics({ register: this.registry });
  }

  /** Registers a function's state gauge, computed from `state()` at each scrape (once per name). */
  stateGauge(def: StateGauge, state: () => State): void {
    if (this.registry.getSingleMetric(def.name)) return;
    new Gauge({
      name: def.name,
      help: def.help,
      labelNames: def.labelNames ?? [],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const s of def.collect(state())) this.set(s.labels ?? {}, s.value);
      },
    });
  }
}
