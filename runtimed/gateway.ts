/**
 * The Runtime Gateway of a Runtime Pod (issue 15, ADR 0017): HTTPS on the Pod IP in front of the
 * function Runs this runtimed serves.
 *
 *   POST /v1/namespaces/{ns}/runs/{name}/{uid}/invoke
 *   Authorization: Bearer <Kubernetes token>; body: JSON (at most 1 MiB); answer: the function's
 *   JSON output (at most 1 MiB) with X-Kruntime-Invocation-ID, or a Kubernetes Status.
 *
 * Authorization: the caller may `get` that Run. The gateway asks the API server with the caller's
 * own token (a SelfSubjectAccessReview: the API server authenticates the token, as a TokenReview
 * would, and authorises that identity, as a SubjectAccessReview would); runtimed's identity is
 * never used for a caller. Answers are cached for at most 30 s per token digest and Run.
 * Then: UID mismatch 404, not ready 503, a call in flight 429 (one at a time, no queue, no retry).
 */
import { hash, randomUUID } from 'node:crypto';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { KubeClient } from '../lib/kube/client.ts';
import { isApiError } from '../lib/kube/errors.ts';
import { writeFailureStatus } from '../lib/kube/status.ts';
import type { FunctionEndpoint } from '../lib/run/phases.ts';
import { createCa, issueServing } from '../lib/tls/certs.ts';
import type { Duplex } from 'node:stream';
import { refuseUpgrade } from '../lib/session/relay.ts';
import type { DialIn } from './dial-in.ts';
import type { CallTarget } from './function-runs.ts';
import { Operations, type SessionRefusal, type SessionTarget, type Upgrade } from './session-server.ts';
import type { GatewayMetrics } from './gateway-metrics.ts';
import type { LazyMetrics } from './lazy-metrics.ts';
import { FUNCTION_IO_LIMIT, type InvokeResult } from './runtime-server/functions.ts';
import type { Run } from './types.ts';
import { outliveClientIdle } from '../lib/http/keepalive.ts';

export const INVOCATION_HEADER = 'X-Kruntime-Invocation-ID';
/** How long an authorization answer is reused (per token digest and Run). */
export const REVIEW_TTL_MS = 30_000;
const REVIEW_CACHE_MAX = 10_000;

const INVOKE_PATH = /^\/v1\/namespaces\/([a-z0-9-]{1,63})\/runs\/([a-z0-9.-]{1,253})\/([A-Za-z0-9-]{1,64})\/invoke$/;
const SESSION_PATH = /^\/v1\/namespaces\/([a-z0-9-]{1,63})\/runs\/([a-z0-9.-]{1,253})\/([A-Za-z0-9-]{1,64})\/session$/;
/** Browsers cannot set Authorization on a WebSocket: the token may come as this subprotocol (as with kube-apiserver). */
export const TOKEN_PROTOCOL_PREFIX = 'base64url.bearer.authorization.k8s.io.';

export interface InvokeRoute {
  namespace: string;
  name: string;
  uid: string;
}

/** A path URL parsing leaves as it is: `/`, then no `/`, `%`, `\\` or other character it would change; no dot segment. */
const PLAIN_PATH = /^\/(?!\/)[A-Za-z0-9._~/-]*$/;
const DOT_SEGMENT = /(?:^|\/)\.{1,2}(?:\/|$)/;

/**
 * Pure: the path of a request target (`req.url`), as `new URL(target, base).pathname` gives it. A
 * plain path (the gateway's own URLs: letters, digits, `.-_~/`, no dot segment) is taken as it is,
 * without building a URL (this is the hot path); anything else goes through URL parsing.
 */
export function requestPath(target: string): string {
  const q = target.indexOf('?');
  const path = q < 0 ? target : target.slice(0, q);
  if (PLAIN_PATH.test(path) && !DOT_SEGMENT.test(path)) return path;
  return new URL(target, 'https://gateway').pathname;
}

/** Pure: the Run an invoke URL names, or undefined for anything else. */
export function parseInvokePath(pathname: string): InvokeRoute | undefined {
  const m = INVOKE_PATH.exec(pathname);
  if (!m?.[1] || !m[2] || !m[3]) return undefined;
  return { namespace: m[1], name: m[2], uid: m[3] };
}

/** Pure: the Run a session URL names (`.../runs/{name}/{uid}/session`), or undefined. */
export function parseSessionPath(pathname: string): InvokeRoute | undefined {
  const m = SESSION_PATH.exec(pathname);
  if (!m?.[1] || !m[2] || !m[3]) return undefined;
  return { namespace: m[1], name: m[2], uid: m[3] };
}

/** Pure: the caller's token from `Authorization: Bearer` or, for browsers, the token subprotocol. */
export function callerToken(headers: IncomingMessage['headers']): string | undefined {
  const auth = headers.authorization ?? '';
  if (auth.startsWith('Bearer ') && auth.length > 7) return auth.slice(7).trim();
  for (const p of String(headers['sec-websocket-protocol'] ?? '').split(',')) {
    const v = p.trim();
    if (v.startsWith(TOKEN_PROTOCOL_PREFIX) && v.length > TOKEN_PROTOCOL_PREFIX.length)
      return Buffer.from(v.slice(TOKEN_PROTOCOL_PREFIX.length), 'base64url').toString('utf8');
  }
  return undefined;
}

export type Review = 'allowed' | 'denied' | 'unauthenticated';
/** What a caller asks for: a function call (`get` runs) or a session operation (`create` runs/session, as the aggregated API). */
export type Access = 'invoke' | 'session';
const ACCESS: Record<Access, { verb: string; group: string; resource: string; subresource?: string }> = {
  invoke: { verb: 'get', group: 'kruntimes.io', resource: 'runs' },
  session: { verb: 'create', group: 'sessions.kruntimes.io', resource: 'runs', subresource: 'session' },
};

/** Authorization answers per sha256(token) + Run, reused for at most ttlMs; the token itself is never kept. */
export class ReviewCache {
  private readonly entries = new Map<string, { review: Review; expires: number }>();
  constructor(
    private readonly ttlMs = REVIEW_TTL_MS,
    private readonly max = REVIEW_CACHE_MAX,
  ) {}

  static key(token: string, r: InvokeRoute, access: Access = 'invoke'): string {
    return `${hash('sha256', token, 'hex')}/${access}/${r.namespace}/${r.name}`;
  }

  get(key: string, now: number): Review | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (e.expires <= now) {
      this.entries.delete(key);
      return undefined;
    }
    return e.review;
  }

  set(key: string, review: Review, now: number): void {
    if (this.entries.size >= this.max) {
      for (const [k, e] of this.entries) if (e.expires <= now) this.entries.delete(k);
      if (this.entries.size >= this.max) this.entries.clear();
    }
    this.entries.set(key, { review, expires: now + this.ttlMs });
  }
}

/** Asks the API server, as the caller, whether the caller may `get` the Run (or open a session on it). */
export async function reviewAsCaller(
  client: KubeClient,
  token: string,
  r: InvokeRoute,
  access: Access = 'invoke',
): Promise<Review> {
  try {
    const res = await client
      .withToken(token)
      .create<{ metadata: object; status?: { allowed?: boolean } }>(
        '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
        {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SelfSubjectAccessReview',
          spec: {
            resourceAttributes: { namespace: r.namespace, name: r.name, ...ACCESS[access] },
          },
        },
      );
    return res.status?.allowed ? 'allowed' : 'denied';
  } catch (err) {
    if (isApiError(err, 401)) return 'unauthenticated';
    // 403 on the review itself: the caller may not even ask; nothing is allowed.
    if (isApiError(err, 403)) return 'denied';
    throw err;
  }
}

export interface GatewayDeps {
  address: string;
  port: number;
  namespace: string;
  client: KubeClient;
  log: Logger;
  target(name: string, uid: string): CallTarget;
  review?: (token: string, r: InvokeRoute, access: Access) => Promise<Review>;
  /** Session operations through the gateway (SDK and browser clients); absent: 404. */
  sessions?: {
    channel: DialIn;
    target(name: string, uid: string): SessionTarget | SessionRefusal | { code: 404; message: string };
  };
  now?: () => number;
  metrics?: LazyMetrics;
}

export interface Gateway {
  endpoint(run: Run): FunctionEndpoint;
  close(): void;
}

function status(res: ServerResponse, code: number, reason: string, message: string, extra = {}): void {
  writeFailureStatus(res, code, reason, message, extra);
}

const REFUSED: Record<number, string> = { 404: 'NotFound', 429: 'TooManyRequests', 503: 'ServiceUnavailable' };

/** Maps a call's result to the HTTP answer (function errors never change the Run's phase). */
export function resultAnswer(r: InvokeResult): { code: number; reason?: string; body: string } {
  if (r.ok) return { code: 200, body: JSON.stringify(r.output ?? null) };
  const codes: Record<string, number> = {
    FunctionError: 500,
    OutputTooLarge: 502,
    Busy: 429,
    Cancelled: 503,
    NotRegistered: 503,
  };
  return { code: codes[r.reason] ?? 500, reason: r.reason, body: r.error };
}

/** The body, or undefined past `limit` bytes (events, not an async iterator: this is the hot path). */
function readLimited(req: IncomingMessage, limit: number): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= limit) chunks.push(c);
    });
    req.once('end', () => resolve(size > limit ? undefined : Buffer.concat(chunks).toString('utf8')));
    req.once('error', reject);
  });
}

/**
 * The body when it has all arrived already (it usually comes with the headers), taken at once
 * from the request's buffer: no 'data' or 'end' event (each comes a tick later). All of it is
 * there when the request is complete or its buffer holds Content-Length bytes. Undefined when more
 * is to come or it is over `limit` bytes (then readLimited waits for it, or drains it).
 */
export function bodyNow(req: IncomingMessage, limit: number): string | undefined {
  const whole = req.complete || req.readableLength === Number(req.headers['content-length']);
  if (!whole || req.readableFlowing || req.readableLength > limit) return undefined;
  const chunks: Buffer[] = [];
  for (let c = req.read() as Buffer | null; c !== null; c = req.read() as Buffer | null) chunks.push(c);
  return Buffer.concat(chunks).toString('utf8');
}

type Refusal = { code: 401 | 403; reason: string; message: string };

/**
 * The review of a caller for a Run: the cached answer as it is (no promise, no await: a cached
 * call goes on in the same turn), else the API server's, cached unless the token was not accepted.
 */
function reviewOf(
  d: GatewayDeps,
  cache: ReviewCache,
  token: string,
  route: InvokeRoute,
  access: Access,
): Review | Promise<Review> {
  const now = (d.now ?? Date.now)();
  const key = ReviewCache.key(token, route, access);
  const cached = cache.get(key, now);
  if (cached) return cached;
  return (d.review ?? ((t, r, x) => reviewAsCaller(d.client, t, r, x)))(token, route, access).then((review) => {
    d.metrics?.use((m) => m.reviews.inc({ result: review }));
    if (review !== 'unauthenticated') cache.set(key, review, now);
    return review;
  });
}

/** Pure: the refusal of a review (undefined when allowed). */
function refusalOf(review: Review, route: InvokeRoute, access: Access): Refusal | undefined {
  if (review === 'unauthenticated')
    return { code: 401, reason: 'Unauthorized', message: 'the token was not accepted by the Kubernetes API server' };
  if (review === 'denied') {
    const what = access === 'invoke' ? 'get runs.kruntimes.io' : 'create runs/session (sessions.kruntimes.io)';
    return {
      code: 403,
      reason: 'Forbidden',
      message: `the caller may not ${what} ${route.name} in ${route.namespace}`,
    };
  }
  return undefined;
}

/**
 * Authentication and authorization of a caller for a Run: undefined when allowed, else the
 * refusal; answered at once (no promise) when the review is cached, which is the hot path.
 */
function decide(
  d: GatewayDeps,
  cache: ReviewCache,
  token: string | undefined,
  route: InvokeRoute,
  access: Access,
): Refusal | undefined | Promise<Refusal | undefined> {
  if (!token) return { code: 401, reason: 'Unauthorized', message: 'a bearer token is required' };
  const review = reviewOf(d, cache, token, route, access);
  return typeof review === 'string'
    ? refusalOf(review, route, access)
    : review.then((r) => refusalOf(r, route, access));
}

/** The bearer token of a call (a function call takes it from the Authorization header only). */
function bearer(req: IncomingMessage): string | undefined {
  const auth = req.headers.authorization ?? '';
  return auth.startsWith('Bearer ') && auth.length > 7 ? auth.slice(7).trim() : undefined;
}

/** Sends the refusal of a call (401 without a token asks for one). */
function refuse(res: ServerResponse, refusal: Refusal, token: string | undefined): void {
  status(res, refusal.code, refusal.reason, refusal.message, token ? {} : { 'WWW-Authenticate': 'Bearer' });
}

/** A session operation through the gateway: route, authorise as the aggregated API does, then relay. */
async function upgrade(d: GatewayDeps, cache: ReviewCache, operations: Operations, up: Upgrade): Promise<void> {
  const { req, socket } = up;
  const route = parseSessionPath(requestPath(req.url ?? '/'));
  if (!route || route.namespace !== d.namespace || !d.sessions)
    return refuseUpgrade(socket, 404, 'NotFound', 'no such session endpoint');
  const refusal = await decide(d, cache, callerToken(req.headers), route, 'session');
  if (refusal) return refuseUpgrade(socket, refusal.code, refusal.reason, refusal.message);
  const target = d.sessions.target(route.name, route.uid);
  if ('code' in target) {
    const reason = { 404: 'NotFound', 409: 'Conflict', 429: 'TooManyRequests' }[target.code];
    return refuseUpgrade(socket, target.code, reason, target.message);
  }
  await operations.start(d.sessions.channel, target, up);
}

/**
 * One request: route, authorise (before anything about the Run is revealed), read, call, answer.
 * A call with a cached review whose body came with its headers reaches the target without waiting
 * for a stream event or the API server (reviewOf, bodyNow): this is the hot path.
 */
async function serve(d: GatewayDeps, cache: ReviewCache, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const route = parseInvokePath(requestPath(req.url ?? '/'));
  if (!route || route.namespace !== d.namespace) return status(res, 404, 'NotFound', 'no such endpoint');
  if (req.method !== 'POST') return status(res, 405, 'MethodNotAllowed', 'use POST');
  if (Number(req.headers['content-length'] ?? 0) > FUNCTION_IO_LIMIT)
    return status(res, 413, 'RequestEntityTooLarge', `the request body exceeds ${FUNCTION_IO_LIMIT} bytes`);
  const token = bearer(req);
  const decided = decide(d, cache, token, route, 'invoke');
  const refusal = decided instanceof Promise ? await decided : decided;
  if (refusal) return refuse(res, refusal, token);
  // A body that came with the headers is in the request's buffer once the parser's turn ends: one promise later.
  let body = bodyNow(req, FUNCTION_IO_LIMIT);
  if (body === undefined) body = await Promise.resolve().then(() => bodyNow(req, FUNCTION_IO_LIMIT));
  body ??= await readLimited(req, FUNCTION_IO_LIMIT);
  if (body === undefined)
    return status(res, 413, 'RequestEntityTooLarge', `the request body exceeds ${FUNCTION_IO_LIMIT} bytes`);
  let payload: string;
  try {
    payload = JSON.stringify(JSON.parse(body.trim() === '' ? 'null' : body));
  } catch {
    return status(res, 400, 'BadRequest', 'the request body must be JSON');
  }
  const target = d.target(route.name, route.uid);
  if (target.code !== 200) return status(res, target.code, REFUSED[target.code] ?? 'Error', target.message);
  const started = performance.now();
  const call = target.call(payload);
  // The invocation id is made while the function runs.
  const id = randomUUID();
  const a = resultAnswer(await call);
  // Per call at debug (the hot path; counts and latency are metrics); failed calls at info.
  const fields = { run: route.name, invocation: id, code: a.code, ms: Math.round(performance.now() - started) };
  if (a.reason) d.log.info({ ...fields, reason: a.reason }, 'function call failed');
  else d.log.debug(fields, 'function call');
  if (a.reason) return status(res, a.code, a.reason, a.body, { [INVOCATION_HEADER]: id });
  res.writeHead(200, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(a.body),
    [INVOCATION_HEADER]: id,
  });
  res.end(a.body);
}

/** Counts a request in flight until its answer is sent (or the connection goes), then by code and time. */
function measure(m: GatewayMetrics, res: ServerResponse): void {
  const started = performance.now();
  m.inflight.inc();
  res.once('close', () => {
    m.inflight.dec();
    const code = String(res.statusCode);
    m.invocations.inc({ code });
    m.duration.observe({ code }, (performance.now() - started) / 1000);
  });
}

export async function startGateway(d: GatewayDeps): Promise<Gateway> {
  const now = new Date();
  const ca = await createCa(`runtimed-gateway-issuer.${d.address}`, now, 365);
  const pair = await issueServing(ca, `runtimed-gateway.${d.address}`, { dns: [], ips: [d.address] }, now, 365);
  const cache = new ReviewCache();
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    serve(d, cache, req, res).catch((err: unknown) => {
      d.log.error({ err, path: req.url }, 'gateway request failed');
      if (!res.headersSent) status(res, 503, 'ServiceUnavailable', 'the gateway could not complete the call');
      else res.destroy();
    });
  };
  const srv = https.createServer({ cert: pair.cert, key: pair.key, minVersion: 'TLSv1.2' }, (req, res) => {
    const m = d.metrics?.current;
    if (m || !d.metrics) {
      if (m) measure(m, res);
      handle(req, res);
      return;
    }
    // The metrics are not loaded yet (they usually are, with the first function Run's endpoint).
    void d.metrics.load().then((loaded) => {
      measure(loaded, res);
      handle(req, res);
    });
  });
  const operations = new Operations();
  srv.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => undefined);
    upgrade(d, cache, operations, { req, socket, head }).catch((err: unknown) => {
      d.log.error({ err }, 'gateway session request failed');
      refuseUpgrade(socket, 503, 'ServiceUnavailable', 'the gateway could not open the session');
    });
  });
  outliveClientIdle(srv);
  await new Promise<void>((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(d.port, d.address, () => resolve());
  });
  const host = d.address.includes(':') ? `[${d.address}]` : d.address;
  const port = (srv.address() as AddressInfo).port;
  return {
    endpoint: (run) => {
      void d.metrics?.load(); // this Pod serves function calls from now on
      return endpointOf(run, host, port, ca.cert);
    },
    close: () => srv.close(),
  };
}

function endpointOf(run: Run, host: string, port: number, caCert: string): FunctionEndpoint {
  return {
    protocol: 'HTTPS',
    url: `https://${host}:${port}/v1/namespaces/${run.metadata.namespace}/runs/${run.metadata.name}/${run.metadata.uid}/invoke`,
    caBundle: Buffer.from(caCert).toString('base64'),
  };
}
