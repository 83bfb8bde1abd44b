/**
 * Typed client for the OpenSandbox Lifecycle API (the subset the JobClass adapter uses:
 * list/create/get/delete sandboxes). Request and response types come from the generated
 * spec types; responses are shape-checked before they are trusted. The API key travels only
 * in the OPEN-SANDBOX-API-KEY header and never appears in errors.
 */
import { randomUUID } from 'node:crypto';
import { apiUrl, checkEndpoint, type EndpointPolicy } from './endpoint.ts';
import { OpenSandboxError, kindOfStatus, parseRetryAfter } from './errors.ts';
import { encodeMetadataFilter } from './metadata.ts';
import { fetchTransport, type HttpResponse, type Transport } from './transport.ts';
import {
  API_KEY_HEADER,
  BASE_PATH,
  type CreateSandboxRequest,
  type CreateSandboxResponse,
  type ErrorResponse,
  type ListSandboxesResponse,
  type Sandbox,
} from './types.ts';

export interface ClientOptions {
  endpoint: string;
  apiKey: string;
  policy?: EndpointPolicy;
  transport?: Transport;
  /** Per-request timeout for reads and deletes (default 10 s). */
  timeoutMs?: number;
  /** Timeout of POST /sandboxes; upstream answers only once the sandbox runs (default 150 s). */
  createTimeoutMs?: number;
  now?: () => number;
}

export interface ListFilter {
  metadata?: Record<string, string>;
  states?: string[];
}

/** What the adapter needs from the API; the client implements it and tests fake it. */
export interface SandboxApi {
  list(filter: ListFilter, page?: number, pageSize?: number): Promise<ListSandboxesResponse>;
  listAll(filter: ListFilter): Promise<Sandbox[]>;
  create(req: CreateSandboxRequest): Promise<CreateSandboxResponse>;
  get(id: string): Promise<Sandbox | undefined>;
  /** 'not-found' when the sandbox is already gone. */
  delete(id: string): Promise<'deleted' | 'not-found'>;
  /** The server's own health report (GET /health, outside /v1); rejects when unreachable. */
  health(): Promise<Health>;
}

/**
 * GET /health answers 200 while the server is healthy and 5xx (e.g. 503 {"status":"unhealthy"})
 * while it reports itself unhealthy. A server without the endpoint (404) is 'unknown': the
 * authenticated list then decides alone.
 */
export type Health = { healthy: true } | { healthy: false; message: string } | { healthy: 'unknown' };

const MAX_PAGES = 50;
const PAGE_SIZE = 100;

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function sandboxShape(v: unknown): v is Sandbox {
  return isObj(v) && typeof v.id === 'string' && isObj(v.status) && typeof v.status.state === 'string';
}

function listShape(v: unknown): v is ListSandboxesResponse {
  return (
    isObj(v) &&
    Array.isArray(v.items) &&
    v.items.every(sandboxShape) &&
    isObj(v.pagination) &&
    typeof v.pagination.hasNextPage === 'boolean'
  );
}

export class OpenSandboxClient implements SandboxApi {
  private readonly endpoint: URL;
  private readonly transport: Transport;
  private readonly now: () => number;

  constructor(private readonly o: ClientOptions) {
    const check = checkEndpoint(o.endpoint, o.policy);
    if (!check.ok) throw new OpenSandboxError('invalid', check.message);
    this.endpoint = check.url;
    this.transport = o.transport ?? fetchTransport();
    this.now = o.now ?? Date.now;
  }

  async list(filter: ListFilter, page = 1, pageSize = PAGE_SIZE): Promise<ListSandboxesResponse> {
    const q = new URLSearchParams();
    for (const s of filter.states ?? []) q.append('state', s);
    if (filter.metadata && Object.keys(filter.metadata).length)
      q.set('metadata', encodeMetadataFilter(filter.metadata));
    q.set('page', String(page));
    q.set('pageSize', String(pageSize));
    const body = await this.call('GET', '/sandboxes', { query: q });
    if (!listShape(body))
      throw new OpenSandboxError('protocol', 'GET /sandboxes: response is not a ListSandboxesResponse');
    return body;
  }

  /** Every sandbox matching the filter, following pagination (bounded). */
  async listAll(filter: ListFilter): Promise<Sandbox[]> {
    const out: Sandbox[] = [];
    for (let page = 1; page <= MAX_PAGES; page++) {
      const res = await this.list(filter, page);
      out.push(...res.items);
      if (!res.pagination.hasNextPage) return out;
    }
    throw new OpenSandboxError('protocol', `GET /sandboxes: more than ${MAX_PAGES} pages for one filter`);
  }

  async create(req: CreateSandboxRequest): Promise<CreateSandboxResponse> {
    const body = await this.call('POST', '/sandboxes', {
      body: req,
      timeoutMs: this.o.createTimeoutMs ?? 150_000,
      unsafe: true,
    });
    if (!sandboxShape(body))
      throw new OpenSandboxError('protocol', 'POST /sandboxes: response is not a CreateSandboxResponse', {
        outcomeUnknown: true,
      });
    return body;
  }

  async get(id: string): Promise<Sandbox | undefined> {
    try {
      const body = await this.call('GET', `/sandboxes/${encodeURIComponent(id)}`);
      if (!sandboxShape(body)) throw new OpenSandboxError('protocol', 'GET /sandboxes/{id}: response is not a Sandbox');
      return body;
    } catch (err) {
      if (err instanceof OpenSandboxError && err.kind === 'not-found') return undefined;
      throw err;
    }
  }

  async delete(id: string): Promise<'deleted' | 'not-found'> {
    try {
      await this.call('DELETE', `/sandboxes/${encodeURIComponent(id)}`);
      return 'deleted';
    } catch (err) {
      if (err instanceof OpenSandboxError && err.kind === 'not-found') return 'not-found';
      throw err;
    }
  }

  async health(): Promise<Health> {
    let res: HttpResponse;
    const timeoutMs = this.o.timeoutMs ?? 10_000;
    try {
      res = await this.transport({
        method: 'GET',
        url: apiUrl(this.endpoint, '/health'),
        headers: { accept: 'application/json' },
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      const timeout = err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError');
      throw new OpenSandboxError(
        timeout ? 'timeout' : 'network',
        `GET /health: ${timeout ? `no answer within ${timeoutMs} ms` : `request failed (${errorText(err)})`}`,
      );
    }
    if (res.status >= 200 && res.status < 300) return { healthy: true };
    if (res.status === 404 || res.status === 405) return { healthy: 'unknown' };
    let status = '';
    try {
      const b = JSON.parse(res.body) as unknown;
      if (isObj(b) && typeof b.status === 'string') status = ` ${truncate(b.status)}`;
    } catch {
      /* not JSON */
    }
    return { healthy: false, message: `GET /health: HTTP ${res.status}${status}` };
  }

  private async call(
    method: string,
    path: string,
    opts: { query?: URLSearchParams; body?: unknown; timeoutMs?: number; unsafe?: boolean } = {},
  ): Promise<unknown> {
    const what = `${method} ${path.replace(/\/sandboxes\/[^/]+/, '/sandboxes/{id}')}`;
    const headers: Record<string, string> = {
      [API_KEY_HEADER]: this.o.apiKey,
      accept: 'application/json',
      'x-request-id': randomUUID(),
    };
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    const timeoutMs = opts.timeoutMs ?? this.o.timeoutMs ?? 10_000;
    let res: HttpResponse;
    try {
      res = await this.transport({
        method,
        url: apiUrl(this.endpoint, `${BASE_PATH}${path}`, opts.query),
        headers,
        ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      const timeout = err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError');
      throw new OpenSandboxError(
        timeout ? 'timeout' : 'network',
        `${what}: ${timeout ? `no answer within ${timeoutMs} ms` : `request failed (${errorText(err)})`}`,
        { outcomeUnknown: !!opts.unsafe },
      );
    }
    return this.answer(what, res, !!opts.unsafe);
  }

  private answer(what: string, res: HttpResponse, unsafe: boolean): unknown {
    let body: unknown;
    try {
      body = res.body ? JSON.parse(res.body) : undefined;
    } catch {
      body = undefined;
    }
    if (res.status >= 200 && res.status < 300) {
      if (res.body && body === undefined)
        throw new OpenSandboxError('protocol', `${what}: HTTP ${res.status} with a body that is not JSON`, {
          status: res.status,
          outcomeUnknown: unsafe,
        });
      return body;
    }
    const err = isObj(body) && typeof body.code === 'string' ? (body as ErrorResponse) : undefined;
    const kind = kindOfStatus(res.status);
    const retryAfterMs = parseRetryAfter(res.headers['retry-after'], this.now());
    throw new OpenSandboxError(
      kind,
      `${what}: HTTP ${res.status}${err ? ` ${err.code}: ${truncate(err.message)}` : ''}`,
      {
        status: res.status,
        ...(err ? { code: err.code } : {}),
        ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
        outcomeUnknown: unsafe && (kind === 'server' || kind === 'protocol'),
      },
    );
  }
}

function truncate(s: string): string {
  return s.length > 300 ? `${s.slice(0, 300)}…` : s;
}

function errorText(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = (err as Error & { cause?: unknown }).cause;
  return cause instanceof Error ? `${err.message}: ${cause.message}` : err.message;
}
