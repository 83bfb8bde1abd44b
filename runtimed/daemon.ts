/**
 * runtimed: watches only the Runs assigned to its own Pod (field selector on the CRD's
 * selectable field status.assignedPod), keeps the Pod's kruntimes.io/RuntimedReady heartbeat
 * fresh, and hands every Run to the Runner. Serves /healthz, /readyz and /metrics.
 */
import http from 'node:http';
import type { Registry } from 'prom-client';
import type { Logger } from 'pino';
import { PatchType, type KubeClient } from '../lib/kube/client.ts';
import { ListWatch } from '../lib/kube/watch.ts';
import type { RuntimedConfig } from './config.ts';
import type { Finisher } from './finish.ts';
import type { ArtifactRef } from './artifacts/store.ts';
import type { RuntimeClient } from './runtime-client.ts';
import { Runner } from './runner.ts';
import { leaseValidity } from './fence.ts';
import { ArtifactCleaner } from './artifact-gc.ts';
import { startWorkspaceCleaner, usedByAssignedRuns } from './workspaces.ts';
import { Jwks } from './session-auth.ts';
import { SESSION_CONDITION, startSessionServer } from './session-server.ts';
import type { Run } from './types.ts';
import { removeBeneath } from './artifacts/safe-dir.ts';
import { startGateway } from './gateway.ts';
import { GatewayMetrics } from './gateway-metrics.ts';

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
      if (d.type === 'deleted') void runner.onDeleted(d.object);
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
  const beat = (): void => {
    const probedAt = performance.now();
    heartbeat(client, cfg, new Date(), since, fingerprint)
      .then(() => runtime.renewLease(leaseValidity(probedAt, performance.now())))
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

/** runtimed's liveness and readiness (the Runtime Server answers on its socket). */
async function serveHealth(cfg: RuntimedConfig, runtime: RuntimeClient, registry: Registry): Promise<http.Server> {
  const health = http.createServer((req, res) => {
    if (req.url === '/healthz') {
      res.end('ok');
      return;
    }
    if (req.url === '/metrics') {
      void registry.metrics().then((text) => {
        res.setHeader('Content-Type', registry.contentType);
        res.end(text);
      });
      return;
    }
    if (req.url === '/readyz') {
      void runtime.health().then((ok) => {
        res.statusCode = ok ? 200 : 503;
        res.end(ok ? 'ok' : 'runtime server not healthy');
      });
      return;
    }
    res.statusCode = 404;
    res.end();
  });
  await new Promise<void>((r) => health.listen(cfg.healthPort, cfg.healthAddress, () => r()));
  return health;
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
  metrics: GatewayMetrics,
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

export async function startDaemon(o: {
  client: KubeClient;
  cfg: RuntimedConfig;
  runtime: RuntimeClient;
  finisher: Finisher;
  log: Logger;
}): Promise<Daemon> {
  const { client, cfg, runtime, log } = o;
  // Run directories runtimed prepares are written by the Run's uid (another uid, same fsGroup).
  process.umask(0o002);
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
  // The session server (its key and certificate) starts while the Runtime Server starts; Runs
  // are taken only once the Runtime Server answers.
  const sessionsStarted = serveSessions(o, runner);
  sessionsStarted.catch(() => undefined); // awaited below; its failure fails the start there
  const metrics = new GatewayMetrics();
  const gateway = await serveGateway(o, runner, metrics);
  await waitForRuntime(runtime, log);
  let recheck = (): void => undefined;
  const watch = await watchAssignedRuns(client, cfg, runner, log, () => recheck());
  const gc = await startArtifactCleaner(client, cfg, o.finisher, log);
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
  recheck = (): void => cleaner.recheck();
  runner.onRelease = recheck;
  const sessions = await sessionsStarted;
  const timer = startHeartbeat(client, cfg, runtime, sessions.fingerprint, log);
  const health = await serveHealth(cfg, runtime, metrics.registry);
  log.info({ pod: cfg.podName, runtime: cfg.runtime, workers: cfg.workers }, 'runtimed ready');
  return {
    drain: (boundMs) => {
      runner.beginStop();
      return gc.drain(boundMs);
    },
    stop: async () => {
      clearInterval(timer);
      for (const part of [watch, gc, cleaner]) part.stop();
      health.close();
      sessions.close();
      gateway.close();
      await Promise.resolve();
    },
  };
}
