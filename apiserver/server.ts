/**
 * The extension API server process: an HTTPS server (admission router now; aggregated APIs
 * later) whose certificate is reloaded when the mounted Secret changes, a plain HTTP server
 * for /healthz, /readyz and /metrics, and the watch relay behind Lease leader election.
 */
import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import express from 'express';
import type { Logger } from 'pino';
import type { KubeClient } from '../lib/kube/client.ts';
import { FnMetrics } from '../lib/fn/metrics.ts';
import type { FunctionDef, Resource, WatchFunction } from '../lib/fn/types.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { ADMISSION_PREFIX, admissionRouter } from './admission.ts';
import { verifyProxyCert, type RequestHeaderConfig, type RequestHeaderSource } from './aggregation/requestheader.ts';
import { aggregationRouter } from './aggregation/router.ts';
import type { RunLookup } from './logs/handler.ts';
import { R } from '../lib/fn/resources.ts';
import type { ServerConfig } from './config.ts';
import { admissionFunctions, functionUser, watchFunctions } from './functions.ts';
import { LeaderElector } from './leader.ts';
import { Relay } from './relay.ts';
import {
  CaAgent,
  Endpoints,
  inprocess,
  loadTransportConfig,
  transportOf,
  WebhookTransport,
  type Transport,
  type TransportName,
} from './transport.ts';
import { LambdaTransport, loadLambdaConfig, sigv4Signer } from './lambda.ts';
import { SessionProxy, SessionTokens } from './sessions/handler.ts';
import { outliveClientIdle } from '../lib/http/keepalive.ts';
import { refuseUpgrade } from '../lib/http/upgrade-refusal.ts';
import { FollowedFiles } from '../lib/fs/followed-files.ts';

/** The answer to an upgrade request on any path but a Run's session. */
const UPGRADE_NOT_FOUND =
  'no WebSocket endpoint here: sessions are at /apis/sessions.kruntimes.io/v1alpha1/namespaces/{namespace}/runs/{name}/session';

export interface Running {
  stop(): Promise<void>;
}

function listen(srv: http.Server | https.Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(port, host, () => resolve());
  });
}

export async function startServer(
  cfg: ServerConfig,
  functions: FunctionDef[],
  client: KubeClient,
  log: Logger,
): Promise<Running> {
  const metrics = new FnMetrics();
  const selected = cfg.only.length ? functions.filter((f) => cfg.only.includes(f.name)) : functions;
  const state: HostState = { relayRunning: false, leader: !cfg.leaderElection };
  const app = express();
  const { backend, tokens } = backendIdentity(cfg, client);
  let relayHost: RelayHost | undefined;
  const cachedObject = relayCache(state, () => relayHost);
  const cachedRun: RunLookup = (ns, name) => cachedObject(R.runs, ns, name);
  const aggregated = await aggregationRouter(backend, log.child({ host: 'aggregation' }), tokens, client, cachedRun);
  if (cfg.admissionClientAuth === 'required')
    app.use(
      ADMISSION_PREFIX,
      requireApiServerCert(() => aggregated.source.current(), log),
    );
  // Each admission function reads and reviews as its own ServiceAccount, like the watch functions.
  const asFunction = (fn: FunctionDef): KubeClient => client.as(functionUser(cfg.namespace, fn.name));
  app.use(
    admissionRouter(admissionFunctions(selected), asFunction, log.child({ host: 'admission' }), metrics, {
      cached: cachedObject,
    }),
  );
  app.use(aggregated.router);
  const secure = secureServer(cfg, app, aggregated.source, log);
  const sessions = new SessionProxy({
    client: backend,
    log: log.child({ host: 'sessions' }),
    authenticate: aggregated.authenticate,
    tokens,
  });
  secure.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    if (!sessions.handle(req, socket, head)) refuseUpgrade(socket, 404, 'NotFound', UPGRADE_NOT_FOUND);
  });
  await listen(secure, cfg.httpsPort, cfg.listenAddress);

  const healthSrv = await startHealth(cfg, state, metrics);
  log.info(
    {
      https: `${cfg.listenAddress}:${cfg.httpsPort}`,
      health: `${cfg.healthAddress}:${cfg.healthPort}`,
      functions: selected.map((f) => f.name),
    },
    'extension API server listening',
  );

  const host = (relayHost = startRelay(cfg, selected, client, log, { state, metrics }));

  return {
    stop: async () => {
      const { relay, elector, relayStarted } = host;
      await Promise.race([relayStarted, new Promise((r) => setTimeout(r, 100))]);
      await relay.stop();
      host.endpoints?.stop();
      await elector?.release();
      await new Promise((r) => secure.close(r));
      await new Promise((r) => healthSrv.close(r));
    },
  };
}

/**
 * The aggregated APIs act as their own narrow ServiceAccount (read Runs, Runtime Pods and their
 * runtimed log, open sessions), never with the functions' permissions this process also holds.
 */
function backendIdentity(cfg: ServerConfig, client: KubeClient): { backend: KubeClient; tokens: SessionTokens } {
  const backendSA = process.env.KRT_RUN_EXTENSION_SA ?? 'kruntimes-run-extension-api';
  const backend = client.as(`system:serviceaccount:${cfg.namespace}:${backendSA}`);
  return { backend, tokens: new SessionTokens(backend, cfg.namespace, backendSA) };
}

/** The relay's informer cache while this process runs the relay (Run logs and admission functions read it). */
function relayCache(
  state: HostState,
  host: () => RelayHost | undefined,
): (r: Resource, ns: string | undefined, name: string) => KubeObject | undefined {
  return (r, ns, name) => (state.relayRunning ? host()?.relay.state.get(r, ns, name) : undefined);
}

/** Liveness, readiness (the relay has synced where this process leads) and metrics. */
async function startHealth(cfg: ServerConfig, state: HostState, metrics: FnMetrics): Promise<http.Server> {
  const health = express();
  health.get('/healthz', (_req, res) => {
    res.type('text/plain').send('ok');
  });
  health.get('/readyz', (_req, res) => {
    const ok = !state.leader || state.relayRunning;
    res
      .status(ok ? 200 : 503)
      .type('text/plain')
      .send(ok ? 'ok' : 'relay not synced');
  });
  health.get('/metrics', (_req, res) => {
    void metrics.registry.metrics().then((m) => res.type(metrics.registry.contentType).send(m));
  });
  const healthSrv = http.createServer(health);
  await listen(healthSrv, cfg.healthPort, cfg.healthAddress);
  return healthSrv;
}

interface HostState {
  relayRunning: boolean;
  leader: boolean;
}

interface RelayHost {
  relay: Relay;
  endpoints: Endpoints | undefined;
  elector: LeaderElector | undefined;
  relayStarted: Promise<void>;
}

/** Starts the watch relay, behind leader election when configured; exits the process on loss. */
function startRelay(
  cfg: ServerConfig,
  selected: FunctionDef[],
  client: KubeClient,
  log: Logger,
  host: { state: HostState; metrics: FnMetrics },
): RelayHost {
  const watch = watchFunctions(selected);
  const { transportFor, endpoints } = transports(cfg, watch, client, log, host.metrics);
  const relay = new Relay(watch, {
    client,
    // Every operation and live read of a function is made as its own ServiceAccount (the relay
    // may impersonate exactly those, by resourceNames): its generated role is all it can do.
    clientFor: (fn) => client.as(functionUser(cfg.namespace, fn.name)),
    transportFor,
    log: log.child({ host: 'relay' }),
    metrics: host.metrics,
  });
  const elector = cfg.leaderElection
    ? new LeaderElector({ client, namespace: cfg.namespace, name: 'kruntimes-relay', identity: cfg.podName, log })
    : undefined;
  const run = async (): Promise<void> => {
    if (elector)
      await elector.run(() => {
        log.error('lost leadership; exiting so a fresh process competes again');
        process.exit(1);
      });
    host.state.leader = true;
    await endpoints?.start();
    await relay.start();
    host.state.relayRunning = true;
  };
  const relayStarted = run().catch((err: unknown) => {
    log.error({ err }, 'relay failed to start');
    process.exit(1);
  });
  return { relay, elector, relayStarted, endpoints };
}

/** Each watch function's transport, from KRT_FUNCTION_TRANSPORT[S] (see apiserver/transport.ts). */
function transports(
  cfg: ServerConfig,
  watch: WatchFunction[],
  client: KubeClient,
  log: Logger,
  metrics: FnMetrics,
): { transportFor: (fn: WatchFunction) => Transport; endpoints: Endpoints | undefined } {
  const tcfg = loadTransportConfig(process.env, cfg.namespace);
  const by = (t: string): string[] => watch.filter((f) => transportOf(tcfg, f.name) === t).map((f) => f.name);
  log.info({ webhook: by('webhook'), lambda: by('lambda'), default: tcfg.default }, 'function transports');
  const onRounds =
    (transport: string) =>
    (fn: string, rounds: number): void =>
      metrics.invocationRounds.inc({ function: fn, transport, rounds: rounds > 3 ? '4+' : String(rounds) });
  let endpoints: Endpoints | undefined;
  const remote: Partial<Record<TransportName, Transport>> = { inprocess };
  if (by('webhook').length) {
    endpoints = new Endpoints(client, cfg.namespace, (err) => log.warn({ err }, 'function server Pod watch error'));
    const ca = new CaAgent(tcfg.caFile, (err) =>
      err
        ? log.warn({ err }, 'function CA bundle reload failed; keeping the old one')
        : log.info('reloaded function CA bundle'),
    );
    remote.webhook = new WebhookTransport({
      endpoints,
      agent: () => ca.get(),
      cfg: tcfg,
      onRounds: onRounds('webhook'),
    });
  }
  if (by('lambda').length) {
    const lcfg = loadLambdaConfig(process.env);
    log.info({ endpoints: lcfg.endpoints, sigv4: lcfg.sigv4, concurrency: lcfg.concurrency }, 'lambda transport');
    remote.lambda = new LambdaTransport(lcfg, lcfg.sigv4 ? sigv4Signer(lcfg.region) : undefined, onRounds('lambda'));
  }
  return { transportFor: (fn) => remote[transportOf(tcfg, fn.name)] ?? inprocess, endpoints };
}

/**
 * Admission webhooks answer only the API server: the call must present the API server's client
 * certificate (the front-proxy certificate, configured for webhooks through the API server's
 * AdmissionConfiguration), so nobody else can probe the admission functions or feed them
 * forged AdmissionReviews.
 */
function requireApiServerCert(cfg: () => RequestHeaderConfig, log: Logger): express.RequestHandler {
  return (req, res, next) => {
    const refused = verifyProxyCert(req, cfg());
    if (!refused) {
      next();
      return;
    }
    log.warn({ path: req.originalUrl, reason: refused }, 'admission call refused');
    res.status(401).json({
      kind: 'Status',
      apiVersion: 'v1',
      status: 'Failure',
      reason: 'Unauthorized',
      code: 401,
      message: `admission webhooks are called by the Kubernetes API server only: ${refused}`,
    });
  };
}

/**
 * The HTTPS server of admission and aggregation. Reloads its certificate when the file changes
 * and the client CA (requestheader CA) when the aggregator's configuration rotates it.
 */
export function secureServer(
  cfg: Pick<ServerConfig, 'certFile' | 'keyFile'>,
  app: express.Express,
  source: RequestHeaderSource,
  log: Logger,
): https.Server {
  // The certificate and key as last read, polled by content: a rotated pair serves once it loads (a
  // half-written rotation, a new certificate with the old key, keeps the old pair).
  const files = new FollowedFiles([cfg.certFile, cfg.keyFile], 2000, () => reload('serving certificate'));
  // Client certificates are requested but verified per request: aggregated requests and (unless
  // KRT_ADMISSION_CLIENT_AUTH=none) admission calls must present the front-proxy certificate.
  const tls = (): https.ServerOptions => ({
    cert: files.contents[0],
    key: files.contents[1],
    ca: source.current().clientCA,
    requestCert: true,
    rejectUnauthorized: false,
    minVersion: 'TLSv1.2',
  });
  // kube-apiserver reuses idle connections for webhook calls: it must be the side that closes them.
  const secure = outliveClientIdle(https.createServer(tls(), app));
  secure.once('close', () => files.stop());
  const reload = (what: string): void => {
    try {
      secure.setSecureContext(tls());
      log.info(`reloaded ${what}`);
    } catch (err) {
      log.warn({ err }, `${what} reload failed; keeping the old one`);
    }
  };
  source.onClientCAChange(() => reload('requestheader client CA'));
  return secure;
}
