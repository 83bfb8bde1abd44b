/**
 * The node agent's kubelet-facing HTTPS server. The API server calls it for pods/log with its
 * kubelet client certificate; the server requires a client certificate signed by the cluster CA
 * (mTLS). exec/attach/port-forward are answered 501 with an explanation.
 */
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseQuery, streamLog } from './logs.ts';
import { outliveClientIdle } from '../lib/http/keepalive.ts';

export interface LogSource {
  /** The log file of a container (current or previous instance) and whether it may still grow. */
  find(
    namespace: string,
    pod: string,
    container: string,
    previous: boolean,
  ): { file: string; running: () => boolean } | { error: string; code: number };
}

export interface ServerOptions {
  port: number;
  host: string;
  cert: Buffer;
  key: Buffer;
  clientCa: Buffer;
  source: LogSource;
}

function text(res: ServerResponse, code: number, body: string): void {
  res.writeHead(code, { 'Content-Type': 'text/plain; charset=utf-8' });
  res.end(body.endsWith('\n') ? body : `${body}\n`);
}

async function handle(req: IncomingMessage, res: ServerResponse, source: LogSource): Promise<void> {
  const url = new URL(req.url ?? '/', 'https://node');
  const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
  if (url.pathname === '/healthz') return text(res, 200, 'ok');
  if (['exec', 'attach', 'portForward', 'run'].includes(parts[0] ?? '')) {
    return text(
      res,
      501,
      `${parts[0]} is not supported by the kruntimes node agent (it runs Pods as host processes); use Run sessions (krt session) instead`,
    );
  }
  if (parts[0] !== 'containerLogs' || parts.length !== 4 || req.method !== 'GET')
    return text(res, 404, `not found: ${url.pathname}`);
  let q;
  try {
    q = parseQuery(url.searchParams, Date.now());
  } catch (err) {
    return text(res, 400, (err as Error).message);
  }
  const found = source.find(parts[1]!, parts[2]!, parts[3]!, q.previous);
  if ('error' in found) return text(res, found.code, found.error);
  res.writeHead(200, {
    'Content-Type': 'text/plain; charset=utf-8',
    ...(q.follow ? { 'Transfer-Encoding': 'chunked' } : {}),
  });
  let closed = false;
  res.on('close', () => {
    closed = true;
  });
  await streamLog(found.file, q, { write: (s) => res.write(s), closed: () => closed }, () => !found.running());
  res.end();
}

export function startServer(o: ServerOptions): Promise<https.Server> {
  const srv = https.createServer(
    { cert: o.cert, key: o.key, ca: o.clientCa, requestCert: true, rejectUnauthorized: true },
    (req, res) => {
      handle(req, res, o.source).catch((err: unknown) => {
        if (!res.headersSent) text(res, 500, String(err));
        else res.end();
      });
    },
  );
  // kube-apiserver (logs, exec) reuses idle connections: let it be the side that closes them.
  outliveClientIdle(srv);
  return new Promise((resolve, reject) => {
    srv.on('error', reject);
    srv.listen(o.port, o.host, () => resolve(srv));
  });
}
