/**
 * runtimed: watches only the Runs assigned to its own Pod (field selector on the CRD's
 * selectable field status.assignedPod), keeps the Pod's kruntimes.io/RuntimedReady heartbeat
 * fresh, and hands every Run to the Runner. Serves /healthz, /readyz and /metrics.
 */
import type { Logger } from 'pino';
import { PatchType, type KubeClient } from '../lib/kube/client.ts';
import { ListWatch } from '../lib/kube/watch.ts';
import type { RuntimedConfig } from './config.ts';
import type { Finisher } from './finish.ts';
import type { ArtifactRef } from './artifacts/store.ts';
import type { RuntimeClient } from './runtime-client.ts';
import { Runner } from './runner.ts';
import { leaseValidity, RenewalOrder } from './fence.ts';
import { ArtifactCleaner } from './artifact-gc.ts';
import { startWorkspaceCleaner, usedByAssignedRuns } from './workspaces.ts';
import { Jwks } from './session-auth.ts';
import { SESSION_CONDITION, startSessionServer } from './session-server.ts';
import type { Run } from './types.ts';
import { removeBeneath } from './artifacts/safe-dir.ts';
import { startGateway } from './gateway.ts';
import { LazyMetrics } from './lazy-metrics.ts';
import { serveHealth, StartGate } from './health.ts';

export interface Daemon {
  /** Keeps cleaning up deleted Runs' artifacts while the namespace or Runtime is going away (bounded). */
  drain(boundMs: number): Promise<void>;
  stop(): Promise<void>;
}

export async function heartbeat(
  client: KubeClient,
  cfg: RuntimedConfig,
  now: Date,
  since: string,
  sessionFingerprint?: string,
): Promise<void> {
  const conditions: object[] = [
    {
      type: 'kruntimes.io/RuntimedReady',
      status: 'True',
      reason: 'Heartbeat',
      message: 'runtimed heartbeat is fresh',
      lastProbeTime: now.toISOString(),
      lastTransitionTime: since,
    },
  ];
  // The extension API server pins the session port's certificate to this fingerprint.
  if (sessionFingerprint)
    conditions.push({
      type: SESSION_CONDITION,
      status: 'True',
      reason: 'Listening',
      message: `port=${cfg.sessionPort} sha256=${sessionFingerprint}`,
      lastTransitionTime: since,
    });
  await client.patch(
    `/api/v1/namespaces/${cfg.namespace}/pods/${cfg.podName}/status`,
    { status: { conditions } },
    PatchType.strategic,
  );
}

async function waitForRuntime(runtime: RuntimeClient, log: Logger): Promise<void> {
  for (let i = 0; !(await runtime.health()); i++) {
    if (i % 20 === 0) log.info('waiting for the Runtime Server socket');
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Watches only the Runs assigned to this Pod (a selectable field) and feeds them to the runner. */
async function watchAssignedRuns(
  client: KubeClient,
  cfg: RuntimedConfig,
  runner: Runner,
  log: Logger,
  onWorkspaceRunChange: () => void,
): Promise<ListWatch<Run>> {
  const watch = new ListWatch<Run>(
    client,
    {
      path: `/apis/kruntimes.io/v1alpha1/namespaces/${cfg.namespace}/runs`,
      fieldSelector: `status.assignedPod=${cfg.podName}`,
      onError: (err) => log.warn({ err }, 'run watch error'),
    },
    (d) => {
      if (d.type === 'deleted') runner.background(d.object, runner.onDeleted(d.object));
      else runner.onRun(d.object);
      if (d.object.spec.workspace) onWorkspaceRunChange();
    },
  );
  watch.start();
  await watch.synced;
  return watch;
}

/** Publishes runtimed's heartbeat (and the session certificate's fingerprint) every heartbeatMs; each
 * accepted heartbeat renews the Runtime Server's execution lease up to FENCE_MS after its lastProbeTime. */
function startHeartbeat(
  client: KubeClient,
  cfg: RuntimedConfig,
  runtime: RuntimeClient,
  fingerprint: string,
  log: Logger,
): NodeJS.Timeout {
  const since = new Date().toISOString();
  const order = new RenewalOrder();
  const beat = (): void => {
    const probedAt = performance.now();
    heartbeat(client, cfg, new Date(), since, fingerprint)
      .then(() => (order.admit(probedAt) ? runtime.renewLease(leaseValidity(probedAt, performance.now())) : undefined))
      .catch((err: unknown) => log.warn({ err }, 'heartbeat or lease renewal failed'));
  };
  beat();
  return setInterval(beat, cfg.heartbeatMs);
}

/** Cleans up the artifacts of deleted Runs of this Runtime, wherever they ran (artifact-gc.ts). */
async function startArtifactCleaner(
  client: KubeClient,
  cfg: RuntimedConfig,
  finisher: Finisher,
  log: Logger,
): Promise<ArtifactCleaner> {
  const gc = new ArtifactCleaner({
    client,
    cfg,
    log: log.child({ part: 'artifact-gc' }),
    ...(finisher.store ? { store: finisher.store } : {}),
  });
  await gc.start();
  return gc;
}

/** runtimed's TLS session port: session operations and artifact reads for the extension server. */
function serveSessions(
  o: { client: KubeClient; cfg: RuntimedConfig; finisher: Finisher; log: Logger; runtime: RuntimeClient },
  runner: Runner,
): ReturnType<typeof startSessionServer> {
  const { cfg, finisher } = o;
  return startSessionServer({
    address: cfg.healthAddress,
    port: cfg.sessionPort,
    channel: o.runtime.channel,
    subject: cfg.sessionSubject,
    podUID: cfg.podUID,
    jwks: new Jwks(o.client),
    log: o.log.child({ part: 'sessions' }),
    target: (uid) => runner.sessionTarget(uid),
    ...(finisher.store
      ? { openArtifact: (ref: unknown) => finisher.store!.open(ref as ArtifactRef, { namespace: cfg.namespace }) }
      : {}),
  });
}

/** The Runtime Gateway of function Runs (ADR 0017); function Runs' endpoints name it. */
async function serveGateway(
  o: { client: KubeClient; cfg: RuntimedConfig; log: Logger; runtime: RuntimeClient },
  runner: Runner,
  metrics: LazyMetrics,
): ReturnType<typeof startGateway> {
  const gateway = await startGateway({
    address: o.cfg.healthAddress,
    port: o.cfg.gatewayPort,
    namespace: o.cfg.namespace,
    client: o.client,
    log: o.log.child({ part: 'gateway' }),
    target: (name, uid) => runner.functionTarget(name, uid),
    metrics,
    sessions: {
      channel: o.runtime.channel,
      target: (name, uid) =>
        runner.activeRunName(uid) === name
          ? runner.sessionTarget(uid)
          : { code: 404, message: `no session Run ${name} with UID ${uid} on this Runtime Pod` },
    },
  });
  runner.endpointFor = (run) => gateway.endpoint(run);
  return gateway;
}

interface DaemonDeps {
  client: KubeClient;
  cfg: RuntimedConfig;
  runtime: RuntimeClient;
  finisher: Finisher;
  log: Logger;
  /** How long /readyz holds a probe while runtimed starts (health.ts READY_HOLD_MS). */
  readyHoldMs?: number;
}

/** What runtimed runs once started; stop() ends them. */
interface Parts {
  runner: Runner;
  stop(): void;
  drain(boundMs: number): Promise<void>;
}

/** When (ms since the process started) each step of the start ended: logged with "runtimed ready". */
type Marks = Record<string, number>;
const mark = (m: Marks, step: string): void => {
  m[step] = Math.round(performance.now());
};

/** Everything but the health port, in order; what it opened is closed again when a step fails. */
async function startParts(o: DaemonDeps, metrics: LazyMetrics, marks: Marks): Promise<Parts> {
  const { client, cfg, runtime, log } = o;
  const runner = new Runner({
    client,
    cfg,
    runtime,
    log,
    now: () => new Date(),
    out: (s) => {
      process.stdout.write(s);
    },
    finisher: o.finisher,
  });
  const opened: { stop(): void }[] = [];
  // The session server (its key and certificate) starts while the Runtime Server starts; Runs
  // are taken only once the Runtime Server answers.
  const sessionsStarted = serveSessions(o, runner);
  sessionsStarted.catch(() => undefined); // awaited below; its failure fails the start there
  try {
    const gateway = await serveGateway(o, runner, metrics);
    opened.push({ stop: () => gateway.close() });
    await waitForRuntime(runtime, log);
    mark(marks, 'runtimeServer');
    const rest = await watchAndClean(o, runner, opened);
    mark(marks, 'runs');
    const sessions = await sessionsStarted;
    opened.push({ stop: () => sessions.close() });
    const timer = startHeartbeat(client, cfg, runtime, sessions.fingerprint, log);
    opened.push({ stop: () => clearInterval(timer) });
    return { runner, stop: () => stopAll(opened), drain: (boundMs) => rest.gc.drain(boundMs) };
  } catch (err) {
    stopAll(opened);
    await sessionsStarted.then(
      (s) => s.close(),
      () => undefined,
    );
    throw err;
  }
}

function stopAll(parts: { stop(): void }[]): void {
  for (const p of [...parts].reverse()) p.stop();
}

/** The watch of this Pod's Runs, the artifact cleaner and the workspace cleaner (each added to opened). */
async function watchAndClean(
  o: DaemonDeps,
  runner: Runner,
  opened: { stop(): void }[],
): Promise<{ gc: ArtifactCleaner }> {
  const { client, cfg, log } = o;
  let recheck = (): void => undefined;
  const watch = await watchAssignedRuns(client, cfg, runner, log, () => recheck());
  opened.push(watch);
  const gc = await startArtifactCleaner(client, cfg, o.finisher, log);
  opened.push(gc);
  const cleaner = startWorkspaceCleaner({
    client,
    namespace: cfg.namespace,
    podName: cfg.podName,
    podUID: cfg.podUID,
    remove: (n) => removeBeneath(cfg.workspaceRoot, ['persistent', n]),
    // In use while a Run assigned here is not terminal (from Run status) or still runs locally.
    inUse: (n) => usedByAssignedRuns(n, cfg.podUID, watch.store.list()) || runner.usesWorkspace(n),
    log,
  });
  opened.push(cleaner);
  recheck = (): void => cleaner.recheck();
  runner.onRelease = recheck;
  return { gc };
}

export async function startDaemon(o: DaemonDeps): Promise<Daemon> {
  const { cfg, runtime, log } = o;
  // Run directories runtimed prepares are written by the Run's uid (another uid, same fsGroup).
  process.umask(0o002);
  const metrics = new LazyMetrics();
  const gate = new StartGate();
  // The health port listens first, so the readiness probe waits on the start (health.ts) instead
  // of being refused until its next period; it reports ready only once the gate opens.
  const health = await serveHealth({
    address: cfg.healthAddress,
    port: cfg.healthPort,
    gate,
    runtimeHealthy: () => runtime.health(),
    metrics,
    ...(o.readyHoldMs !== undefined ? { holdMs: o.readyHoldMs } : {}),
  });
  const marks: Marks = {};
  mark(marks, 'health');
  let parts: Parts;
  try {
    parts = await startParts(o, metrics, marks);
  } catch (err) {
    health.close();
    throw err;
  }
  gate.open();
  log.info({ pod: cfg.podName, runtime: cfg.runtime, workers: cfg.workers, startMs: marks }, 'runtimed ready');
  return {
    drain: (boundMs) => {
      parts.runner.beginStop();
      return parts.drain(boundMs);
    },
    stop: async () => {
      parts.stop();
      health.close();
      await Promise.resolve();
    },
  };
}
