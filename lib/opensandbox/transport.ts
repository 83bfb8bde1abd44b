/**
 * HTTP transports for the OpenSandbox client: the platform fetch (undici inside Node 22) by
 * default, or node:https with an explicit CA bundle for backends signed by a private CA (fetch
 * only trusts the default store plus NODE_EXTRA_CA_CERTS).
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';

export interface HttpRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
  signal: AbortSignal;
}
export interface HttpResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}
export type Transport = (req: HttpRequest) => Promise<HttpResponse>;

/** A transport over a fetch implementation (default: globalThis.fetch). */
export function fetchTransport(f: typeof fetch = globalThis.fetch): Transport {
  return async (req) => {
    const res = await f(req.url, {
      method: req.method,
      headers: req.headers,
      ...(req.body !== undefined ? { body: req.body } : {}),
      signal: req.signal,
      redirect: 'error',
    });
    const headers: Record<string, string> = {};
    res.headers.forEach((v, k) => {
      headers[k] = v;
    });
    return { status: res.status, headers, body: await res.text() };
  };
}

/** A transport over node:http(s); `ca` replaces the default trust store for https URLs. */
export function nodeTransport(opts: { ca?: string | Buffer } = {}): Transport {
  const agent = new https.Agent({ keepAlive: true, ...(opts.ca ? { ca: opts.ca } : {}) });
  return (req) =>
    new Promise<HttpResponse>((resolve, reject) => {
      const u = new URL(req.url);
      const mod = u.protocol === 'https:' ? https : http;
      const r = mod.request(
        u,
        { method: req.method, headers: req.headers, signal: req.signal, ...(u.protocol === 'https:' ? { agent } : {}) },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () => {
            const headers: Record<string, string> = {};
            for (const [k, v] of Object.entries(res.headers))
              if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
            resolve({ status: res.statusCode ?? 0, headers, body: Buffer.concat(chunks).toString('utf8') });
          });
        },
      );
      r.on('error', reject);
      r.end(req.body);
    });
}

let shared: Transport | undefined;

/** The process's one transport for OpenSandbox servers (JobClass adapter and devws substrate):
 * node:https trusting the CA file when one is set (KRT_OPENSANDBOX_CA_FILE), else fetch. */
export function sharedTransport(caFile: string | undefined): Transport {
  shared ??= caFile ? nodeTransport({ ca: readFileSync(caFile) }) : fetchTransport();
  return shared;
}
