/**
 * A local OpenSandbox-compatible Lifecycle API server for tests (express on 127.0.0.1).
 *
 * - HTTPS with a provided certificate, or plain HTTP only when `insecure: true` (local dev).
 * - Every request and every response under /v1 is validated against the vendored
 *   sandbox-lifecycle.yml; an invalid request is answered 400 and recorded in
 *   `requestViolations`, an invalid response is replaced by a 500 and recorded in
 *   `responseViolations` (tests assert both stay empty).
 * - Sandboxes live in memory with their metadata; GET /v1/sandboxes filters by state and by the
 *   URL-encoded `metadata` query (as upstream: parse_qsl of the decoded parameter) and paginates.
 * - API keys in the OPEN-SANDBOX-API-KEY header; `setApiKeys` rotates them.
 * - Pools (extensions.poolRef) with a maximum of live sandboxes: a full pool answers HTTP 429
 *   KUBERNETES::POOL_CAPACITY_EXHAUSTED with Retry-After (upstream PR #1581; not in the vendored
 *   spec, so that one response is validated as a documented drift: ErrorResponse + Retry-After).
 * - Faults: `crashAfterCreate` stores the sandbox and drops the connection without an answer;
 *   `healthDown` answers every /v1 call with 500 and /health with 503; `unhealthy` only makes
 *   /health report 503 (the server says it is unhealthy while its API still answers).
 * - Tests drive lifecycles with `transition` / `finish`; `timeout` expiry terminates a sandbox
 *   with reason ttl_expiry.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import express, { type NextFunction, type Request, type Response as ExpressResponse } from 'express';
import { specPath } from '../../lib/opensandbox/gen.ts';
import { decodeMetadataFilter, metadataProblem } from '../../lib/opensandbox/metadata.ts';
import type { CreateSandboxRequest, Sandbox } from '../../lib/opensandbox/types.ts';
import { SpecValidator, type Found } from './openapi.ts';

export interface ServerOptions {
  apiKeys: string[];
  tls?: { cert: string | Buffer; key: string | Buffer };
  /** Serve plain HTTP (only for local development; must be explicit). */
  insecure?: boolean;
  /** Pool name -> maximum live sandboxes. Unknown pools are rejected with 400. */
  pools?: Record<string, number>;
  /** Maximum live sandboxes created without a pool (default unlimited). */
  capacity?: number;
  /** State of a new sandbox (upstream Kubernetes answers once Running; default Running). */
  initialState?: 'Pending' | 'Running';
  retryAfterSeconds?: number;
  /** The address to listen on and name in url (default 127.0.0.1; Pods on a real kubelet need the host's bridge address). */
  host?: string;
  now?: () => Date;
  specFile?: string;
}

export interface StoredSandbox {
  id: string;
  request: CreateSandboxRequest;
  status: { state: string; reason?: string; message?: string; lastTransitionAt: string };
  createdAt: string;
  expiresAt?: string;
  pool?: string;
}

export interface Faults {
  crashAfterCreate: number;
  healthDown: boolean;
  unhealthy: boolean;
  /** While true, sandboxes created meanwhile are missing from lists (an eventually consistent index). */
  listLag: boolean;
  /** While true, DELETE answers 500 and changes nothing. */
  deleteFails: boolean;
}

export interface OpenSandboxTestServer {
  /** Endpoint for OpenSandboxExecutionParameters.spec.endpoint (the API is under /v1). */
  url: string;
  sandboxes: Map<string, StoredSandbox>;
  faults: Faults;
  requestViolations: string[];
  responseViolations: string[];
  /** Every /v1 call: method, path (without query), answered status (0 when the connection was
   * dropped) and the API key presented (test keys only; lets tests see which key a client used). */
  calls: { method: string; path: string; status: number; key?: string }[];
  setApiKeys(keys: string[]): void;
  transition(id: string, state: string, reason?: string, message?: string): void;
  /** Simulates the entrypoint ending: Terminated/completed, or Failed/process_exited. */
  finish(id: string, ok: boolean, message?: string): void;
  close(): Promise<void>;
}

const TERMINAL = new Set(['Terminated', 'Failed']);
const MAX_PAGE_SIZE = 200;
/** Responses upstream sends that the vendored spec does not declare yet. */
const DRIFT: Record<string, Record<string, { $ref: string; headers: Record<string, { $ref: string }> }>> = {
  'post /sandboxes': {
    429: {
      $ref: '#/components/responses/Error',
      headers: { 'Retry-After': { $ref: '#/components/headers/RetryAfter' } },
    },
  },
};

interface Ctx {
  found: Found;
  answered: boolean;
}

class Store {
  readonly sandboxes = new Map<string, StoredSandbox>();
  constructor(private readonly o: ServerOptions) {}

  now(): Date {
    return this.o.now?.() ?? new Date();
  }

  expire(): void {
    const now = this.now().getTime();
    for (const s of this.sandboxes.values()) {
      if (!TERMINAL.has(s.status.state) && s.expiresAt && Date.parse(s.expiresAt) <= now)
        this.set(s, 'Terminated', 'ttl_expiry', 'the sandbox timeout elapsed');
    }
  }

  set(s: StoredSandbox, state: string, reason?: string, message?: string): void {
    s.status = {
      state,
      ...(reason ? { reason } : {}),
      ...(message ? { message } : {}),
      lastTransitionAt: this.now().toISOString(),
    };
  }

  live(pool: string | undefined): number {
    return [...this.sandboxes.values()].filter((s) => s.pool === pool && !TERMINAL.has(s.status.state)).length;
  }

  view(s: StoredSandbox): Sandbox {
    return {
      id: s.id,
      image: { uri: s.request.image?.uri ?? '' },
      status: s.status,
      metadata: s.request.metadata ?? {},
      entrypoint: s.request.entrypoint ?? ['tail', '-f', '/dev/null'],
      createdAt: s.createdAt,
      ...(s.expiresAt ? { expiresAt: s.expiresAt } : {}),
    };
  }
}

function errorBody(code: string, message: string): { code: string; message: string } {
  return { code, message };
}

/** Semantic checks the schema cannot express (as the upstream server makes them). */
function createProblem(
  req: CreateSandboxRequest,
  pools: Record<string, number> | undefined,
): { status: number; code: string; message: string } | undefined {
  const pool = req.extensions?.poolRef;
  if (!pool) {
    if (!!req.image === !!req.snapshotId)
      return {
        status: 400,
        code: 'SANDBOX::INVALID_PARAMETER',
        message: 'exactly one of image or snapshotId is required',
      };
    if (!req.resourceLimits)
      return {
        status: 400,
        code: 'SANDBOX::INVALID_PARAMETER',
        message: 'resourceLimits is required outside pool mode',
      };
  } else if (!pools || !(pool in pools)) {
    return { status: 400, code: 'KUBERNETES::POOL_NOT_FOUND', message: `pool ${pool} does not exist` };
  }
  if (req.image && !req.entrypoint?.length)
    return { status: 400, code: 'SANDBOX::INVALID_PARAMETER', message: 'entrypoint is required with image' };
  const mp = metadataProblem(req.metadata ?? {});
  if (mp) return { status: 400, code: 'SANDBOX::INVALID_METADATA', message: mp };
  return undefined;
}

export async function startOpenSandboxServer(o: ServerOptions): Promise<OpenSandboxTestServer> {
  if (!o.tls && !o.insecure)
    throw new Error('startOpenSandboxServer: give a TLS certificate or set insecure: true (local development only)');
  const spec = SpecValidator.fromFile(o.specFile ?? specPath());
  const store = new Store(o);
  let keys = new Set(o.apiKeys);
  const faults: Faults = {
    crashAfterCreate: 0,
    healthDown: false,
    unhealthy: false,
    listLag: false,
    deleteFails: false,
  };
  const lagging = new Set<string>();
  const requestViolations: string[] = [];
  const responseViolations: string[] = [];
  const calls: OpenSandboxTestServer['calls'] = [];
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');

  app.get('/health', (_req, res) => {
    const down = faults.healthDown || faults.unhealthy;
    res.status(down ? 503 : 200).json({ status: down ? 'unhealthy' : 'healthy' });
  });
  app.use('/v1', express.raw({ type: () => true, limit: '4mb' }));

  /** Sends a validated response (an invalid one becomes a 500 and a recorded violation). */
  const send = (
    req: Request,
    res: ExpressResponse,
    status: number,
    body?: unknown,
    headers: Record<string, string> = {},
  ): void => {
    const ctx = res.locals.ctx as Ctx;
    const all = { 'x-request-id': randomUUID(), ...headers };
    const problems = spec.validateResponse(
      ctx.found,
      status,
      all,
      { present: body !== undefined, value: body },
      DRIFT[`${ctx.found.method} ${ctx.found.template}`],
    );
    ctx.answered = true;
    const key = req.headers['open-sandbox-api-key'];
    calls.push({
      method: req.method,
      path: req.path,
      status: problems.length ? 500 : status,
      ...(typeof key === 'string' ? { key } : {}),
    });
    if (problems.length) {
      responseViolations.push(`${req.method} ${req.path} -> ${status}: ${problems.join('; ')}`);
      res
        .status(500)
        .set('x-request-id', all['x-request-id'])
        .json(errorBody('TEST::INVALID_RESPONSE', problems.join('; ')));
      return;
    }
    res.status(status).set(all);
    if (body === undefined) res.end();
    else res.json(body);
  };

  app.use('/v1', (req: Request, res: ExpressResponse, next: NextFunction) => {
    const url = new URL(req.originalUrl, 'http://x');
    const found = spec.find(req.method, url.pathname.replace(/^\/v1/, ''));
    if (!found) {
      res.status(404).json(errorBody('NOT_FOUND', `no route ${req.method} ${url.pathname}`));
      return;
    }
    res.locals.ctx = { found, answered: false } satisfies Ctx;
    const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    let value: unknown;
    let json = /^application\/json\b/i.test(req.headers['content-type'] ?? '');
    if (raw.length && json) {
      try {
        value = JSON.parse(raw.toString('utf8'));
      } catch {
        json = false;
      }
    }
    const headers = Object.fromEntries(
      Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : v]),
    );
    const problems = spec.validateRequest(found, url.searchParams, headers, { present: raw.length > 0, value, json });
    res.locals.body = value;
    if (faults.healthDown) {
      send(req, res, 500, errorBody('SERVER::UNAVAILABLE', 'the server is unhealthy'));
      return;
    }
    const key = req.headers['open-sandbox-api-key'];
    if (typeof key !== 'string' || !keys.has(key)) {
      send(req, res, 401, errorBody('AUTH::INVALID_API_KEY', 'missing or invalid OPEN-SANDBOX-API-KEY'));
      return;
    }
    if (problems.length) {
      requestViolations.push(`${req.method} ${url.pathname}: ${problems.join('; ')}`);
      send(req, res, 400, errorBody('SANDBOX::INVALID_PARAMETER', problems.join('; ')));
      return;
    }
    store.expire();
    next();
  });

  app.get('/v1/sandboxes', (req, res) => {
    const url = new URL(req.originalUrl, 'http://x');
    const states = url.searchParams.getAll('state');
    const filter = decodeMetadataFilter(url.searchParams.get('metadata') ?? '');
    if (!filter) {
      send(req, res, 400, errorBody('INVALID_METADATA_FORMAT', 'metadata must be a URL-encoded k=v&k2=v2 string'));
      return;
    }
    const page = Number(url.searchParams.get('page') ?? 1);
    const pageSize = Math.min(MAX_PAGE_SIZE, Number(url.searchParams.get('pageSize') ?? 20));
    const all = [...store.sandboxes.values()]
      .filter((s) => !(faults.listLag && lagging.has(s.id)))
      .filter((s) => !states.length || states.includes(s.status.state))
      .filter((s) => Object.entries(filter).every(([k, v]) => s.request.metadata?.[k] === v))
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
    const totalPages = Math.ceil(all.length / pageSize);
    const items = all.slice((page - 1) * pageSize, page * pageSize).map((s) => store.view(s));
    send(req, res, 200, {
      items,
      pagination: { page, pageSize, totalItems: all.length, totalPages, hasNextPage: page < totalPages },
    });
  });

  app.post('/v1/sandboxes', (req, res) => {
    const body = res.locals.body as CreateSandboxRequest;
    const problem = createProblem(body, o.pools);
    if (problem) {
      send(req, res, problem.status, errorBody(problem.code, problem.message));
      return;
    }
    const pool = body.extensions?.poolRef;
    const max = pool ? (o.pools?.[pool] ?? 0) : (o.capacity ?? Infinity);
    if (store.live(pool) >= max) {
      send(
        req,
        res,
        429,
        errorBody(
          'KUBERNETES::POOL_CAPACITY_EXHAUSTED',
          `${pool ? `pool ${pool}` : 'the server'} has no free capacity`,
        ),
        { 'retry-after': String(o.retryAfterSeconds ?? 1) },
      );
      return;
    }
    const now = store.now();
    const s: StoredSandbox = {
      id: randomUUID(),
      request: body,
      createdAt: now.toISOString(),
      status: { state: 'Pending', lastTransitionAt: now.toISOString() },
      ...(typeof body.timeout === 'number'
        ? { expiresAt: new Date(now.getTime() + body.timeout * 1000).toISOString() }
        : {}),
      ...(pool ? { pool } : {}),
    };
    store.set(s, o.initialState ?? 'Running', o.initialState === 'Pending' ? 'provisioning' : 'ready');
    store.sandboxes.set(s.id, s);
    if (faults.listLag) lagging.add(s.id);
    if (faults.crashAfterCreate > 0) {
      faults.crashAfterCreate--;
      (res.locals.ctx as Ctx).answered = true;
      calls.push({ method: req.method, path: req.path, status: 0, key: String(req.headers['open-sandbox-api-key']) });
      req.socket.destroy();
      return;
    }
    const created = {
      id: s.id,
      status: s.status,
      metadata: s.request.metadata ?? {},
      createdAt: s.createdAt,
      entrypoint: s.request.entrypoint ?? [],
      ...(s.expiresAt ? { expiresAt: s.expiresAt } : {}),
    };
    send(req, res, 202, created, { location: `${baseUrl()}/v1/sandboxes/${s.id}` });
  });

  app.get('/v1/sandboxes/:sandboxId', (req, res) => {
    const s = store.sandboxes.get(String(req.params.sandboxId));
    if (!s) {
      send(req, res, 404, errorBody('SANDBOX::NOT_FOUND', 'no such sandbox'));
      return;
    }
    send(req, res, 200, store.view(s));
  });

  app.delete('/v1/sandboxes/:sandboxId', (req, res) => {
    const s = store.sandboxes.get(String(req.params.sandboxId));
    if (!s) {
      send(req, res, 404, errorBody('SANDBOX::NOT_FOUND', 'no such sandbox'));
      return;
    }
    if (faults.deleteFails) {
      send(req, res, 500, errorBody('SERVER::INTERNAL', 'delete failed (injected fault)'));
      return;
    }
    if (!TERMINAL.has(s.status.state)) store.set(s, 'Terminated', 'user_delete', 'deleted through the API');
    send(req, res, 204);
  });

  app.use('/v1', (req: Request, res: ExpressResponse) => {
    const ctx = res.locals.ctx as Ctx | undefined;
    if (ctx && !ctx.answered)
      send(
        req,
        res,
        404,
        errorBody('NOT_IMPLEMENTED', `${req.method} ${req.path} is not implemented by the test server`),
      );
  });

  const server = o.tls ? https.createServer({ cert: o.tls.cert, key: o.tls.key }, app) : http.createServer(app);
  const host = o.host ?? '127.0.0.1';
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as AddressInfo).port;
  const baseUrl = (): string => `${o.tls ? 'https' : 'http'}://${host}:${port}`;

  return {
    url: baseUrl(),
    sandboxes: store.sandboxes,
    faults,
    requestViolations,
    responseViolations,
    calls,
    setApiKeys: (k) => {
      keys = new Set(k);
    },
    transition: (id, state, reason, message) => {
      const s = store.sandboxes.get(id);
      if (!s) throw new Error(`no sandbox ${id}`);
      store.set(s, state, reason, message);
    },
    finish: (id, ok, message) => {
      const s = store.sandboxes.get(id);
      if (!s) throw new Error(`no sandbox ${id}`);
      store.set(
        s,
        ok ? 'Terminated' : 'Failed',
        ok ? 'completed' : 'process_exited',
        message ?? (ok ? 'the entrypoint exited with code 0' : 'the entrypoint exited with a non-zero code'),
      );
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
