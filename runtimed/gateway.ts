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
import { createHash, randomUUID } from 'node:crypto';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { KubeClient } from '../lib/kube/client.ts';
import { isApiError } from '../lib/kube/errors.ts';
import { writeFailureStatus } from '../lib/kube/status.ts';
import type { FunctionEndpoint } from '../lib/run/phases.ts';
import { createCa, issueServing } from '../lib/tls/certs.ts';
import type { CallTarget } from './function-runs.ts';
import { FUNCTION_IO_LIMIT, type InvokeResult } from './runtime-server/functions.ts';
import type { Run } from './types.ts';

export const INVOCATION_HEADER = 'X-Kruntime-Invocation-ID';
/** How long an authorization answer is reused (per token digest and Run). */
export const REVIEW_TTL_MS = 30_000;
const REVIEW_CACHE_MAX = 10_000;

const INVOKE_PATH = /^\/v1\/namespaces\/([a-z0-9-]{1,63})\/runs\/([a-z0-9.-]{1,253})\/([A-Za-z0-9-]{1,64})\/invoke$/;

export interface InvokeRoute {
  namespace: string;
  name: string;
  uid: string;
}

/** Pure: the Run an invoke URL names, or undefined for anything else. */
export function parseInvokePath(pathname: string): InvokeRoute | undefined {
  const m = INVOKE_PATH.exec(pathname);
  if (!m?.[1] || !m[2] || !m[3]) return undefined;
  return { namespace: m[1], name: m[2], uid: m[3] };
}

export type Review = 'allowed' | 'denied' | 'unauthenticated';

/** Authorization answers per sha256(token) + Run, reused for at most ttlMs; the token itself is never kept. */
export class ReviewCache {
  private readonly entries = new Map<string, { review: Review; expires: number }>();
  constructor(
    private readonly ttlMs = REVIEW_TTL_MS,
    private readonly max = REVIEW_CACHE_MAX,
  ) {}

  static key(token: string, r: InvokeRoute): string {
    return `${createHash('sha256').update(token).digest('hex')}/${r.namespace}/${r.name}`;
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

/** Asks the API server, as the caller, whether the caller may `get` the Run. */
export async function reviewAsCaller(client: KubeClient, token: string, r: InvokeRoute): Promise<Review> {
  try {
    const res = await client
      .withToken(token)
      .create<{ metadata: object; status?: { allowed?: boolean } }>(
        '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
        {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SelfSubjectAccessReview',
          spec: {
            resourceAttributes: {
              namespace: r.namespace,
              verb: 'get',
              group: 'kruntimes.io',
              resource: 'runs',
              name: r.name,
            },
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
  review?: (token: string, r: InvokeRoute) => Promise<Review>;
  now?: () => number;
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

async function readLimited(req: IncomingMessage, limit: number): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > limit) return undefined;
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Authentication and authorization of one call; undefined when allowed, else the refusal sent. */
async function authorize(
  d: GatewayDeps,
  cache: ReviewCache,
  req: IncomingMessage,
  res: ServerResponse,
  route: InvokeRoute,
): Promise<boolean> {
  const auth = req.headers.authorization ?? '';
  if (!auth.startsWith('Bearer ') || auth.length <= 7) {
    status(res, 401, 'Unauthorized', 'a bearer token is required', { 'WWW-Authenticate': 'Bearer' });
    return false;
  }
  const token = auth.slice(7).trim();
  const now = (d.now ?? Date.now)();
  const key = ReviewCache.key(token, route);
  let review = cache.get(key, now);
  if (!review) {
    review = await (d.review ?? ((t, r) => reviewAsCaller(d.client, t, r)))(token, route);
    if (review !== 'unauthenticated') cache.set(key, review, now);
  }
  if (review === 'unauthenticated') {
    status(res, 401, 'Unauthorized', 'the token was not accepted by the Kubernetes API server');
    return false;
  }
  if (review === 'denied') {
    status(res, 403, 'Forbidden', `the caller may not get runs.kruntimes.io ${route.name} in ${route.namespace}`);
    return false;
  }
  return true;
}

/** One request: route, authorise (before anything about the Run is revealed), read, call, answer. */
async function serve(d: GatewayDeps, cache: ReviewCache, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const route = parseInvokePath(new URL(req.url ?? '/', 'https://gateway').pathname);
  if (!route || route.namespace !== d.namespace) return status(res, 404, 'NotFound', 'no such endpoint');
  if (req.method !== 'POST') return status(res, 405, 'MethodNotAllowed', 'use POST');
  if (Number(req.headers['content-length'] ?? 0) > FUNCTION_IO_LIMIT)
    return status(res, 413, 'RequestEntityTooLarge', `the request body exceeds ${FUNCTION_IO_LIMIT} bytes`);
  if (!(await authorize(d, cache, req, res, route))) return;
  const body = await readLimited(req, FUNCTION_IO_LIMIT);
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
  const id = randomUUID();
  const started = performance.now();
  const result = await target.call(payload);
  const a = resultAnswer(result);
  d.log.info(
    { run: route.name, invocation: id, code: a.code, ms: Math.round(performance.now() - started) },
    'function call',
  );
  if (a.reason) return status(res, a.code, a.reason, a.body, { [INVOCATION_HEADER]: id });
  res.writeHead(200, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(a.body),
    [INVOCATION_HEADER]: id,
  });
  res.end(a.body);
}

export async function startGateway(d: GatewayDeps): Promise<Gateway> {
  const now = new Date();
  const ca = await createCa(`runtimed-gateway-issuer.${d.address}`, now, 365);
  const pair = await issueServing(ca, `runtimed-gateway.${d.address}`, { dns: [], ips: [d.address] }, now, 365);
  const cache = new ReviewCache();
  const srv = https.createServer({ cert: pair.cert, key: pair.key, minVersion: 'TLSv1.2' }, (req, res) => {
    serve(d, cache, req, res).catch((err: unknown) => {
      d.log.error({ err, path: req.url }, 'gateway request failed');
      if (!res.headersSent) status(res, 503, 'ServiceUnavailable', 'the gateway could not complete the call');
      else res.destroy();
    });
  });
  srv.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(d.port, d.address, () => resolve());
  });
  const host = d.address.includes(':') ? `[${d.address}]` : d.address;
  const port = (srv.address() as AddressInfo).port;
  return {
    endpoint: (run) => ({
      protocol: 'HTTPS',
      url: `https://${host}:${port}/v1/namespaces/${run.metadata.namespace}/runs/${run.metadata.name}/${run.metadata.uid}/invoke`,
      caBundle: Buffer.from(ca.cert).toString('base64'),
    }),
    close: () => srv.close(),
  };
}
