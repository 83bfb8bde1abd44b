/**
 * runtimed's session port: a TLS WebSocket endpoint (GET /v1/sessions/{runUID}) that only the
 * extension API server may use (bound ServiceAccount token, session-auth.ts; the Runtime's
 * NetworkPolicy admits only it). The certificate is generated at start and pinned by
 * publishing its SHA-256 fingerprint in the Pod's kruntimes.io/SessionServer condition.
 * Each connection becomes one operation on the Runtime Server (Unix socket), frames relayed
 * unchanged in both directions.
 */
import { X509Certificate } from 'node:crypto';
import https from 'node:https';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import WebSocket, { WebSocketServer } from 'ws';
import { PROTOCOLS } from '../lib/session/channel.ts';
import { relay, SESSION_AUDIENCE, SESSION_CONDITION } from '../lib/session/relay.ts';
import { createCa } from '../lib/tls/certs.ts';
import { SESSION_HEADER, type SessionSpec } from './runtime-server/sessions.ts';
import { TokenError, type Jwks } from './session-auth.ts';

export { SESSION_CONDITION };

/** What the Runner exposes about a Ready session Run on this Pod. */
export interface SessionTarget { spec: Omit<SessionSpec, 'command'> & { command: string[] }; attach(ws: WebSocket): void }

export interface SessionServerDeps {
  address: string; port: number; socketPath: string; subject: string; jwks: Jwks; log: Logger;
  target(uid: string): SessionTarget | string;
}

export interface SessionServer { fingerprint: string; close(): void }

function refuse(socket: Duplex, code: number, text: string, message: string): void {
  const body = JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', code, reason: text.replace(/ /g, ''), message });
  socket.end(`HTTP/1.1 ${code} ${text}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}

export async function startSessionServer(d: SessionServerDeps): Promise<SessionServer> {
  const pair = await createCa(`runtimed-session.${d.address}`, new Date(), 365);
  const fingerprint = new X509Certificate(pair.cert).fingerprint256;
  const srv = https.createServer({ cert: pair.cert, key: pair.key, minVersion: 'TLSv1.2' }, (_req, res) => { res.statusCode = 404; res.end(); });
  const wss = new WebSocketServer({ noServer: true, handleProtocols: (p) => PROTOCOLS.find((x) => p.has(x)) ?? false });

  const upgrade = async (req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> => {
    const url = new URL(req.url ?? '/', 'https://runtimed');
    const m = /^\/v1\/sessions\/([A-Za-z0-9-]{1,64})$/.exec(url.pathname);
    if (!m?.[1]) { refuse(socket, 404, 'Not Found', 'no such session endpoint'); return; }
    const auth = req.headers.authorization ?? '';
    if (!auth.startsWith('Bearer ')) { refuse(socket, 401, 'Unauthorized', 'a bearer token is required'); return; }
    try {
      await d.jwks.verify(auth.slice(7), { audience: SESSION_AUDIENCE, subject: d.subject, now: new Date() });
    } catch (err) {
      d.log.warn({ err: err instanceof TokenError ? err.message : String(err) }, 'session operation refused');
      refuse(socket, 401, 'Unauthorized', 'session token refused'); return;
    }
    const target = d.target(m[1]);
    if (typeof target === 'string') { refuse(socket, 409, 'Conflict', target); return; }
    const command = url.searchParams.getAll('command');
    const spec: SessionSpec = { ...target.spec, command: command.length ? command : target.spec.command };
    const protocol = String(req.headers['sec-websocket-protocol'] ?? PROTOCOLS[0]).split(',')[0]?.trim() ?? PROTOCOLS[0];
    const inner = new WebSocket(`ws+unix://${d.socketPath}:/v1/sessions`, [protocol ?? ''], { headers: { [SESSION_HEADER]: Buffer.from(JSON.stringify(spec)).toString('base64') } });
    inner.once('error', (err) => { refuse(socket, 503, 'Service Unavailable', `the Runtime Server did not accept the operation: ${err.message}`); });
    inner.once('open', () => {
      wss.handleUpgrade(req, socket, head, (ws) => {
        target.attach(ws);
        relay(ws, inner);
      });
    });
  };
  srv.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    upgrade(req, socket, head).catch((err: unknown) => { d.log.error({ err }, 'session upgrade failed'); refuse(socket, 500, 'Internal Server Error', 'session setup failed'); });
  });
  await new Promise<void>((resolve, reject) => { srv.once('error', reject); srv.listen(d.port, d.address, () => resolve()); });
  return { fingerprint, close: () => { wss.close(); srv.close(); } };
}
