/**
 * The generic function server (`kruntimes fn serve [name...]`): serves the watch functions it is
 * given by name at POST /functions.kruntimes.io/v1alpha1/<name> (the FunctionInvocation wire
 * format, lib/fn/wire.ts), over TLS, plus /healthz and /readyz on the health port. It holds no
 * Kubernetes credentials: it computes operations from what the relay sends and the relay applies
 * them as the function's ServiceAccount. On SIGTERM it stops accepting and finishes in-flight
 * invocations; an invocation cut short is retried by the relay (nothing was applied).
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import express from 'express';
import type { Logger } from 'pino';
import type { WatchFunction } from '../lib/fn/types.ts';
import { loadListenConfig, type ListenConfig } from './config.ts';
import { serveInvocation, WIRE_API_VERSION, WIRE_KIND, type InvocationRequest } from '../lib/fn/wire.ts';
import { outliveClientIdle } from '../lib/http/keepalive.ts';

export interface FnServerConfig extends ListenConfig {
  /** Largest request body accepted (the observed state of one invocation). */
  bodyLimit: string;
}

export function loadFnServerConfig(env: NodeJS.ProcessEnv): FnServerConfig {
  return {
    ...loadListenConfig(env, env.POD_IP ?? '0.0.0.0'),
    bodyLimit: env.KRT_FUNCTION_BODY_LIMIT ?? '64mb',
  };
}

const failure = (res: express.Response, code: number, reason: string, message: string): void => {
  res.status(code).json({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason, code, message });
};

/** The request body when it is a well-formed invocation of `name`, else a reason it is not. */
export function validRequest(body: unknown, name: string): InvocationRequest | string {
  const env = body as { apiVersion?: unknown; kind?: unknown; request?: Partial<InvocationRequest> } | undefined;
  if (env?.apiVersion !== WIRE_API_VERSION || env.kind !== WIRE_KIND)
    return `expected apiVersion ${WIRE_API_VERSION}, kind ${WIRE_KIND}`;
  const r = env.request;
  if (!r || typeof r.uid !== 'string' || typeof r.key !== 'string' || typeof r.now !== 'string')
    return 'request.uid, request.key and request.now are required strings';
  if (r.function !== name) return `request.function ${String(r.function)} does not match the path (${name})`;
  if (Number.isNaN(Date.parse(r.now))) return 'request.now is not an RFC 3339 time';
  if (!Array.isArray(r.reads)) return 'request.reads must be a list';
  return r as InvocationRequest;
}

export function functionApp(functions: WatchFunction[], log: Logger, bodyLimit = '64mb'): express.Express {
  const byName = new Map(functions.map((f) => [f.name, f]));
  const app = express();
  app.post(`/${WIRE_API_VERSION}/:name`, express.json({ limit: bodyLimit }), (req, res) => {
    const name = req.params.name ?? '';
    const fn = byName.get(name);
    if (!fn) return failure(res, 404, 'NotFound', `no function ${name} is served here`);
    const valid = validRequest(req.body, name);
    if (typeof valid === 'string') return failure(res, 400, 'BadRequest', valid);
    void serveInvocation(fn, valid).then((response) => {
      if (response.error?.type === 'Internal')
        log.error({ function: name, key: valid.key, err: response.error.message }, 'handler failed');
      res.json({ apiVersion: WIRE_API_VERSION, kind: WIRE_KIND, response });
    });
  });
  app.use((err: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    const e = err as { status?: number; type?: string; message?: string };
    failure(
      res,
      e.status ?? 400,
      e.type === 'entity.too.large' ? 'RequestEntityTooLarge' : 'BadRequest',
      String(e.message),
    );
  });
  return app;
}

export interface RunningFnServer {
  stop(): Promise<void>;
  address(): { port: number };
}

function listen(srv: http.Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(port, host, () => resolve());
  });
}

export async function startFnServer(
  cfg: FnServerConfig,
  functions: WatchFunction[],
  log: Logger,
): Promise<RunningFnServer> {
  const tls = { cert: readFileSync(cfg.certFile), key: readFileSync(cfg.keyFile), minVersion: 'TLSv1.2' as const };
  const secure = outliveClientIdle(https.createServer(tls, functionApp(functions, log, cfg.bodyLimit)));
  const health = http.createServer((req, res) => {
    res.writeHead(req.url === '/healthz' || req.url === '/readyz' ? 200 : 404, { 'Content-Type': 'text/plain' });
    res.end('ok');
  });
  await listen(secure, cfg.httpsPort, cfg.listenAddress);
  await listen(health, cfg.healthPort, cfg.healthAddress);
  log.info(
    { https: `${cfg.listenAddress}:${cfg.httpsPort}`, functions: functions.map((f) => f.name) },
    'function server listening',
  );
  return {
    address: () => secure.address() as { port: number },
    stop: async () => {
      secure.closeIdleConnections();
      await Promise.all([new Promise((r) => secure.close(r)), new Promise((r) => health.close(r))]);
    },
  };
}
