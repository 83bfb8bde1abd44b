/**
 * A small typed client over node:https. Raw JSON in and out, an explicit Content-Type on
 * every write, typed errors, and streaming for watches and logs. Credentials come from a
 * kubeconfig (via @kubernetes/client-node's KubeConfig) or from explicit TLS material.
 */
import https from 'node:https';
import type { IncomingMessage } from 'node:http';
import { URL } from 'node:url';
import type WebSocket from 'ws';
import { ApiError, type StatusBody } from './errors.ts';
import type { KubeObject, ObjectList } from './types.ts';

export interface ClientOptions {
  server: string;
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  /** A bearer token, or a function returning the current one (rotated projected tokens). */
  token?: string | (() => string);
  userAgent?: string;
  /** Act as this user (Impersonate-User): a narrower identity for one part of a process. */
  impersonate?: string;
}

export type Query = Record<string, string | number | boolean | undefined>;

export const PatchType = {
  merge: 'application/merge-patch+json',
  json: 'application/json-patch+json',
  strategic: 'application/strategic-merge-patch+json',
  apply: 'application/apply-patch+yaml',
} as const;
export type PatchContentType = (typeof PatchType)[keyof typeof PatchType];

export interface RequestOptions {
  query?: Query;
  body?: unknown;
  contentType?: string;
  signal?: AbortSignal;
  timeoutMs?: number;
  accept?: string;
}

export class KubeClient {
  readonly server: URL;
  private readonly agent: https.Agent;
  private readonly token: ClientOptions['token'];
  private readonly userAgent: string;
  private readonly opts: ClientOptions;

  private bearerAgent?: https.Agent;

  constructor(opts: ClientOptions, agent?: https.Agent) {
    this.opts = opts;
    this.server = new URL(opts.server);
    this.agent =
      agent ?? new https.Agent({ keepAlive: true, maxSockets: 64, ca: opts.ca, cert: opts.cert, key: opts.key });
    this.token = opts.token;
    this.userAgent = opts.userAgent ?? 'kruntimes';
  }

  /** The same credentials acting as `user` (requires `impersonate` on that user in RBAC). */
  as(user: string): KubeClient {
    return new KubeClient({ ...this.opts, impersonate: user });
  }

  /**
   * The same server and CA acting only as the holder of `token` (a caller's bearer token): never
   * this client's own token, client certificate or impersonation. Connections are shared among
   * such clients (their agent has no client certificate, so only the token authenticates).
   */
  withToken(token: string): KubeClient {
    this.bearerAgent ??= new https.Agent({ keepAlive: true, maxSockets: 64, ca: this.opts.ca });
    const { server, ca, userAgent } = this.opts;
    return new KubeClient(
      { server, token, ...(ca ? { ca } : {}), ...(userAgent ? { userAgent } : {}) },
      this.bearerAgent,
    );
  }

  /** The bearer token this client sends, if it uses one (for a gateway that takes Kubernetes tokens). */
  bearerToken(): string | undefined {
    return typeof this.token === 'function' ? this.token() : this.token;
  }

  /** Closes idle keep-alive sockets. */
  close(): void {
    this.agent.destroy();
    this.bearerAgent?.destroy();
  }

  async request<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const res = await this.open(method, path, opts);
    const text = await readBody(res);
    const code = res.statusCode ?? 0;
    if (code < 200 || code >= 300) throw errorFromBody(code, text, method, path);
    if (opts.accept && !opts.accept.includes('json')) return text as T;
    return (text ? JSON.parse(text) : undefined) as T;
  }

  /** Opens a request and resolves with the response once its headers arrived (2xx only). */
  async stream(path: string, opts: RequestOptions = {}): Promise<IncomingMessage> {
    const res = await this.open('GET', path, opts);
    const code = res.statusCode ?? 0;
    if (code < 200 || code >= 300) throw errorFromBody(code, await readBody(res), 'GET', path);
    return res;
  }

  /** GET of a non-JSON resource such as pods/log. */
  getText(path: string, query?: Query): Promise<string> {
    return this.request<string>('GET', path, { query, accept: '*/*' });
  }

  get<T extends KubeObject>(path: string, opts?: RequestOptions): Promise<T> {
    return this.request<T>('GET', path, opts);
  }

  list<T extends KubeObject>(path: string, query?: Query): Promise<ObjectList<T>> {
    return this.request<ObjectList<T>>('GET', path, { query });
  }

  create<T extends KubeObject>(path: string, body: unknown, query?: Query): Promise<T> {
    return this.request<T>('POST', path, { body, query, contentType: 'application/json' });
  }

  replace<T extends KubeObject>(path: string, body: unknown): Promise<T> {
    return this.request<T>('PUT', path, { body, contentType: 'application/json' });
  }

  patch<T extends KubeObject>(
    path: string,
    body: unknown,
    type: PatchContentType = PatchType.merge,
    query?: Query,
  ): Promise<T> {
    return this.request<T>('PATCH', path, { body, contentType: type, query });
  }

  /** Server-side apply with a field manager (the function's name). */
  apply<T extends KubeObject>(path: string, body: unknown, fieldManager: string, force = true): Promise<T> {
    return this.patch<T>(path, body, PatchType.apply, { fieldManager, force });
  }

  delete<T = unknown>(path: string, body?: unknown): Promise<T> {
    return this.request<T>('DELETE', path, body === undefined ? {} : { body, contentType: 'application/json' });
  }

  /** Opens a WebSocket (an aggregated session) with this client's credentials; a refused upgrade rejects with the ApiError of its Status. */
  async websocket(path: string, protocols: string[], query: [string, string][] = []): Promise<WebSocket> {
    const url = new URL(path, this.server);
    url.protocol = 'wss:';
    for (const [k, v] of query) url.searchParams.append(k, v);
    const { ca, cert, key } = this.opts;
    // ws loads with the first WebSocket: most users of this client never open one.
    const { sessionWebSocket } = await import('../session/frames.ts');
    const ws = sessionWebSocket(url, protocols, { ca, cert, key, headers: this.headers() });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(ws));
      ws.once('unexpected-response', (_req, res) => {
        void readBody(res).then((text) => reject(errorFromBody(res.statusCode ?? 0, text, 'GET', url.pathname)));
      });
      ws.once('error', reject);
    });
  }

  /** Identity headers of every request: user agent, bearer token (re-read when rotated), impersonation. */
  private headers(): Record<string, string> {
    const token = typeof this.token === 'function' ? this.token() : this.token;
    return {
      'User-Agent': this.userAgent,
      ...(token ? { Authorization: `Bearer ${token}` } : {}),
      ...(this.opts.impersonate ? { 'Impersonate-User': this.opts.impersonate } : {}),
    };
  }

  private open(method: string, path: string, opts: RequestOptions): Promise<IncomingMessage> {
    const url = new URL(path, this.server);
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const headers: Record<string, string> = { ...this.headers(), Accept: opts.accept ?? 'application/json' };
    let payload: string | undefined;
    if (opts.body !== undefined) {
      payload = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
      headers['Content-Type'] = opts.contentType ?? 'application/json';
      headers['Content-Length'] = String(Buffer.byteLength(payload));
    }
    return new Promise((resolve, reject) => {
      const req = https.request(url, { method, headers, agent: this.agent, signal: opts.signal }, resolve);
      req.on('error', reject);
      if (opts.timeoutMs)
        req.setTimeout(opts.timeoutMs, () =>
          req.destroy(new Error(`${method} ${url.pathname}: timed out after ${opts.timeoutMs} ms`)),
        );
      req.end(payload);
    });
  }
}

/** What stays on a response once its body was read: an error after the end must not throw. */
export const ignoreLateError = (): void => undefined;

/**
 * The body of a response, as text. Its listeners go once it ended: a keep-alive socket keeps the
 * first request made on it (Node's agent's socket callbacks hold it) and so that response, and
 * listeners left on it would hold the body, its chunks and the promise with the text for as long
 * as the socket lives (the extension server kept every pooled connection's first response, such as
 * a relay's start-up PodList, after its namespace was gone).
 */
export function readBody(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let chunks: Buffer[] = [];
    const detach = (): void => {
      res.off('data', onData);
      res.off('end', onEnd);
      res.off('error', onError);
      res.on('error', ignoreLateError);
      chunks = [];
    };
    const onData = (c: Buffer): void => void chunks.push(c);
    const onEnd = (): void => {
      const text = Buffer.concat(chunks).toString('utf8');
      detach();
      resolve(text);
    };
    const onError = (err: Error): void => {
      detach();
      reject(err);
    };
    res.on('data', onData);
    res.on('end', onEnd);
    res.on('error', onError);
  });
}

export function errorFromBody(code: number, text: string, method: string, path: string): ApiError {
  let status: StatusBody | undefined;
  try {
    const parsed = JSON.parse(text) as StatusBody;
    if (parsed && typeof parsed === 'object' && parsed.kind === 'Status') status = parsed;
  } catch {
    /* not JSON */
  }
  return new ApiError(code, status, `${method} ${path}: HTTP ${code}${text ? `: ${text.slice(0, 500)}` : ''}`);
}
