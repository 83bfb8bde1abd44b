/**
 * runtimed's session port: a TLS WebSocket endpoint (GET /v1/sessions/{runUID}) that only the
 * extension API server may use (bound ServiceAccount token, session-auth.ts; the Runtime's
 * NetworkPolicy admits only it). The certificate is generated at start and pinned by
 * publishing its SHA-256 fingerprint in the Pod's kruntimes.io/SessionServer condition.
 * Each connection becomes one operation on the Runtime Server (Unix socket), frames relayed
 * unchanged in both directions. The same port serves POST /v1/artifacts/open: the bytes of one
 * artifact of this namespace from the Runtime's store (a Filesystem store is only mounted here),
 * for artifacts.kruntimes.io downloads.
 */
import { X509Certificate } from 'node:crypto';
import https from 'node:https';
import type { IncomingMessage } from 'node:http';
import type { Duplex, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Logger } from 'pino';
import type { WebSocket, WebSocketServer } from 'ws';
import { writeFailureStatus } from '../lib/kube/status.ts';
import { podAudience, refuseUpgrade, SESSION_CONDITION } from '../lib/session/relay.ts';
import { createCa, issueServing } from '../lib/tls/certs.ts';
import type { SessionSpec } from './runtime-server/sessions.ts';
import { TokenError, type Jwks } from './session-auth.ts';
import type { DialIn } from './dial-in.ts';
import { isArtifactError } from './artifacts/errors.ts';

export { SESSION_CONDITION };

/**
 * The session operations of one server (session-operation.ts): ws and the relay load with the
 * first operation, as in the Runtime Server: most Runtime Pods never serve one (about 4 MiB).
 */
export class Operations {
  private loaded: Promise<{ m: typeof import('./session-operation.ts'); wss: WebSocketServer }> | undefined;

  private load(): NonNullable<Operations['loaded']> {
    this.loaded ??= import('./session-operation.ts').then((m) => ({ m, wss: m.sessionWebSocketServer() }));
    return this.loaded;
  }

  async start(channel: DialIn, target: SessionTarget, up: Upgrade): Promise<void> {
    const { m, wss } = await this.load();
    m.startOperation(channel, wss, target, up);
  }

  close(): void {
    void this.loaded?.then(({ wss }) => wss.close());
  }
}

export interface Upgrade {
  req: IncomingMessage;
  socket: Duplex;
  head: Buffer;
}

/** What the Runner exposes about a Ready session Run on this Pod. */
export interface SessionTarget {
  spec: SessionSpec;
  attach(ws: WebSocket): void;
}

/** Why an operation cannot start now (409 no such session / ended, 429 too many operations). */
export interface SessionRefusal {
  code: 409 | 429;
  message: string;
}

export interface SessionServerDeps {
  address: string;
  port: number;
  /** The Runtime Server's dialled-in connections. */
  channel: DialIn;
  subject: string;
  /** This Pod's UID: only tokens minted for it (podAudience) are accepted. */
  podUID: string;
  jwks: Jwks;
  log: Logger;
  target(uid: string): SessionTarget | SessionRefusal;
  /** Opens an artifact reference of this namespace from the Runtime's store (absent: the Runtime has no store). */
  openArtifact?: (ref: unknown) => Promise<Readable>;
}

export interface SessionServer {
  fingerprint: string;
  close(): void;
}

export async function startSessionServer(d: SessionServerDeps): Promise<SessionServer> {
  // A serving certificate from a throwaway issuer: callers trust it by its published fingerprint, not by a CA.
  const now = new Date();
  const pair = await issueServing(
    await createCa(`runtimed-session-issuer.${d.address}`, now, 365),
    `runtimed-session.${d.address}`,
    { dns: [], ips: [d.address] },
    now,
    365,
  );
  const fingerprint = new X509Certificate(pair.cert).fingerprint256;
  const authorize = authorizer(d);
  const srv = https.createServer({ cert: pair.cert, key: pair.key, minVersion: 'TLSv1.2' }, (req, res) => {
    serveArtifact(req, res, d, authorize).catch((err: unknown) => {
      d.log.error({ err }, 'artifact read failed');
      if (!res.headersSent)
        answer(
          res,
          500,
          'InternalError',
          `reading the artifact failed: ${err instanceof Error ? err.message : String(err)}`,
        );
      else res.destroy();
    });
  });
  const operations = new Operations();
  const upgrade = upgrader(d, authorize, operations);
  srv.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    upgrade(req, socket, head).catch((err: unknown) => {
      d.log.error({ err }, 'session upgrade failed');
      refuseUpgrade(socket, 500, 'InternalServerError', 'session setup failed');
    });
  });
  await new Promise<void>((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(d.port, d.address, () => resolve());
  });
  return {
    fingerprint,
    close: () => {
      operations.close();
      srv.close();
    },
  };
}

function answer(res: import('node:http').ServerResponse, code: number, reason: string, message: string): void {
  writeFailureStatus(res, code, reason, message);
}

const ARTIFACT_STATUS: Record<string, [number, string]> = {
  ArtifactNotFound: [404, 'NotFound'],
  ArtifactInputInvalid: [400, 'BadRequest'],
  ArtifactStoreError: [503, 'ServiceUnavailable'],
};

async function serveArtifact(
  req: IncomingMessage,
  res: import('node:http').ServerResponse,
  d: SessionServerDeps,
  authorize: (req: IncomingMessage) => Promise<string | undefined>,
): Promise<void> {
  if (req.method !== 'POST' || new URL(req.url ?? '/', 'https://runtimed').pathname !== '/v1/artifacts/open') {
    answer(res, 404, 'NotFound', 'no such endpoint');
    return;
  }
  const denied = await authorize(req);
  if (denied) {
    answer(res, 401, 'Unauthorized', denied);
    return;
  }
  if (!d.openArtifact) {
    answer(res, 409, 'Conflict', 'this Runtime has no spec.artifactStore');
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > 64 << 10) {
      answer(res, 413, 'RequestEntityTooLarge', 'artifact reference too large');
      return;
    }
    chunks.push(c as Buffer);
  }
  let ref: unknown;
  try {
    ref = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { ref?: unknown }).ref;
  } catch {
    answer(res, 400, 'BadRequest', 'body must be {"ref": ArtifactRef}');
    return;
  }
  let body: Readable;
  try {
    body = await d.openArtifact(ref);
  } catch (err) {
    const known = isArtifactError(err) ? ARTIFACT_STATUS[err.reason] : undefined;
    if (!known || !isArtifactError(err)) throw err;
    answer(res, known[0], known[1], err.message);
    return;
  }
  res.writeHead(200, { 'Content-Type': 'application/octet-stream' });
  await pipeline(body, res);
}

type Authorize = (req: IncomingMessage) => Promise<string | undefined>;

/** Checks the caller's bearer token: undefined when it is the extension server, else why not. */
function authorizer(d: SessionServerDeps): Authorize {
  return async (req) => {
    const auth = req.headers.authorization ?? '';
    if (!auth.startsWith('Bearer ')) return 'a bearer token is required';
    try {
      await d.jwks.verify(auth.slice(7), { audience: podAudience(d.podUID), subject: d.subject, now: new Date() });
      return undefined;
    } catch (err) {
      d.log.warn(
        { err: err instanceof TokenError ? err.message : String(err), path: req.url },
        'session port request refused',
      );
      return 'session token refused';
    }
  };
}

/** Relays one authorised session operation to the Runtime Server's socket. */
function upgrader(
  d: SessionServerDeps,
  authorize: Authorize,
  operations: Operations,
): (req: IncomingMessage, socket: Duplex, head: Buffer) => Promise<void> {
  return async (req, socket, head) => {
    const url = new URL(req.url ?? '/', 'https://runtimed');
    const m = /^\/v1\/sessions\/([A-Za-z0-9-]{1,64})$/.exec(url.pathname);
    if (!m?.[1]) {
      refuseUpgrade(socket, 404, 'NotFound', 'no such session endpoint');
      return;
    }
    const denied = await authorize(req);
    if (denied) {
      refuseUpgrade(socket, 401, 'Unauthorized', denied);
      return;
    }
    const target = d.target(m[1]);
    if ('code' in target) {
      refuseUpgrade(socket, target.code, target.code === 429 ? 'TooManyRequests' : 'Conflict', target.message);
      return;
    }
    await operations.start(d.channel, target, { req, socket, head });
  };
}
