/**
 * sessions.kruntimes.io/v1alpha1: GET .../namespaces/{ns}/runs/{name}/session, a WebSocket
 * served behind API aggregation. The API server has authenticated the caller and authorised
 * `get` on `runs/session`; this backend trusts that only on request-header mTLS connections,
 * requires `create` on runs/session too (a SubjectAccessReview, as exec needs create), reads the Ready session Run and its assigned Runtime Pod, and relays the operation to that
 * Pod's runtimed session port: TLS pinned to the fingerprint runtimed publishes in the Pod's
 * kruntimes.io/SessionServer condition, authenticated with a bound ServiceAccount token for the
 * sessions.kruntimes.io audience. Frames (stdin, stdout, stderr, resize, exit status) pass through.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import WebSocket from 'ws';
import type { KubeClient } from '../../lib/kube/client.ts';
import { isApiError } from '../../lib/kube/errors.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { isTerminal } from '../../lib/run/phases.ts';
import { PROTOCOLS } from '../../lib/session/channel.ts';
import { MAX_FRAME_BYTES, sessionWebSocketServer } from '../../lib/session/frames.ts';
import { refuseUpgrade, relay } from '../../lib/session/relay.ts';
import { checkSessionAccess } from './authorize.ts';
import { LinkError, openLink, responseMessage, type PodObj, type SessionTokens } from './link.ts';

export { SessionTokens, sessionEndpoint } from './link.ts';
import type { UserInfo } from '../aggregation/requestheader.ts';

export const SESSIONS_GROUP = 'sessions.kruntimes.io';
const PATH =
  /^\/apis\/sessions\.kruntimes\.io\/v1alpha1\/namespaces\/([a-z0-9-]{1,63})\/runs\/([a-z0-9.-]{1,253})\/session$/;

type RunObj = KubeObject & {
  spec?: { mode?: { session?: object } };
  status?: { phase?: string; assignedPod?: string; assignedPodUID?: string };
};

export class SessionError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/** Checks the Run can take an operation now; returns its namespace-local Pod name. */
export function checkSessionRun(run: RunObj): { pod: string; podUID?: string } {
  const where = `${run.metadata.namespace}/${run.metadata.name}`;
  if (!run.spec?.mode?.session)
    throw new SessionError(400, 'BadRequest', `Run ${where} is not a session Run: create it with spec.mode.session`);
  const phase = run.status?.phase ?? 'Pending';
  if (isTerminal(phase))
    throw new SessionError(
      409,
      'Conflict',
      `the session of Run ${where} has ended (phase ${phase}); create a new session Run`,
    );
  if (phase !== 'Ready' || !run.status?.assignedPod)
    throw new SessionError(
      409,
      'Conflict',
      `the session of Run ${where} is not Ready yet (phase ${phase}); retry when its phase is Ready`,
    );
  return { pod: run.status.assignedPod, ...(run.status.assignedPodUID ? { podUID: run.status.assignedPodUID } : {}) };
}

export interface SessionDeps {
  client: KubeClient;
  log: Logger;
  tokens: SessionTokens;
  authenticate: (req: IncomingMessage) => UserInfo | string;
}

export class SessionProxy {
  private readonly wss = sessionWebSocketServer();
  constructor(private readonly d: SessionDeps) {}

  /** Handles an upgrade request; returns false when the path is not a session path. */
  handle(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    const url = new URL(req.url ?? '/', 'https://extension');
    const m = PATH.exec(url.pathname);
    if (!m?.[1] || !m[2]) return false;
    this.open(req, socket, head, {
      ns: m[1],
      name: m[2],
      command: url.searchParams.getAll('command'),
      tty: url.searchParams.get('tty') === 'true',
    }).catch((err: unknown) => {
      if (err instanceof SessionError) {
        refuseUpgrade(socket, err.code, err.reason, err.message);
        return;
      }
      this.d.log.error({ err }, 'session operation failed');
      refuseUpgrade(
        socket,
        500,
        'InternalError',
        `opening the session failed: ${err instanceof Error ? err.message : String(err)}`,
      );
    });
    return true;
  }

  private async open(
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    target: { ns: string; name: string; command: string[]; tty: boolean },
  ): Promise<void> {
    const { ns, name, command } = target;
    const who = this.d.authenticate(req);
    if (typeof who === 'string')
      throw new SessionError(401, 'Unauthorized', `this API is served through the Kubernetes API server only: ${who}`);
    await this.authorize(who, ns, name);
    const { run, pod, podName } = await this.lookup(ns, name);
    const link = await openLink(pod, this.d.tokens).catch((err: unknown) => {
      throw err instanceof LinkError ? new SessionError(503, 'ServiceUnavailable', err.message) : err;
    });
    const inner = await dialRuntimed(req, link, run.metadata.uid ?? '', target);
    this.d.log.info(
      { user: who.username, run: `${ns}/${name}`, pod: podName, command: command.length ? command[0] : undefined },
      'session operation opened',
    );
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      relay(ws, inner);
    });
  }

  /** `create` on runs/session for the proxied user, checked with a SubjectAccessReview (fail closed). */
  private async authorize(who: UserInfo, ns: string, name: string): Promise<void> {
    let refused: string | undefined;
    try {
      refused = await checkSessionAccess(this.d.client, who, ns, name);
    } catch (err) {
      this.d.log.warn({ err, user: who.username }, 'session authorisation failed');
      throw new SessionError(
        503,
        'ServiceUnavailable',
        `cannot check whether ${who.username} may create runs/session: ${(err as Error).message}; retry`,
      );
    }
    if (refused) throw new SessionError(403, 'Forbidden', refused);
  }

  /** The session Run and its Runtime Pod, or a SessionError saying why the session is gone. */
  private async lookup(ns: string, name: string): Promise<{ run: RunObj; pod: PodObj; podName: string }> {
    let run: RunObj;
    try {
      run = await this.d.client.get<RunObj>(`/apis/kruntimes.io/v1alpha1/namespaces/${ns}/runs/${name}`);
    } catch (err) {
      if (isApiError(err, 404))
        throw new SessionError(404, 'NotFound', `runs.kruntimes.io "${name}" not found in namespace ${ns}`);
      throw err;
    }
    const { pod: podName, podUID } = checkSessionRun(run);
    let pod: PodObj;
    try {
      pod = await this.d.client.get<PodObj>(`/api/v1/namespaces/${ns}/pods/${podName}`);
    } catch (err) {
      if (isApiError(err, 404))
        throw new SessionError(
          409,
          'Conflict',
          `the Runtime Pod ${podName} of Run ${ns}/${name} no longer exists; the session is gone with it`,
        );
      throw err;
    }
    if (podUID && pod.metadata.uid !== podUID)
      throw new SessionError(
        409,
        'Conflict',
        `the Runtime Pod ${podName} of Run ${ns}/${name} was replaced; the session is gone with it`,
      );
    return { run, pod, podName };
  }
}

/** Opens the WebSocket to runtimed's session port over the pinned link, mapping its refusals. */
async function dialRuntimed(
  req: IncomingMessage,
  link: Awaited<ReturnType<typeof openLink>>,
  runUID: string,
  target: { command: string[]; tty: boolean },
): Promise<WebSocket> {
  const { command } = target;
  const protocols = String(req.headers['sec-websocket-protocol'] ?? PROTOCOLS[0])
    .split(',')
    .map((p) => p.trim())
    .filter((p) => PROTOCOLS.includes(p));
  const q = new URLSearchParams([
    ...command.map((c): [string, string] => ['command', c]),
    ...(target.tty ? [['tty', 'true'] as [string, string]] : []),
  ]);
  const inner = new WebSocket(
    `wss://${link.host}:${link.port}/v1/sessions/${runUID}${q.size ? `?${q.toString()}` : ''}`,
    protocols.length ? protocols : [PROTOCOLS[0] ?? ''],
    {
      headers: { Authorization: `Bearer ${link.token}` },
      createConnection: () => link.socket,
      rejectUnauthorized: false,
      maxPayload: MAX_FRAME_BYTES,
    },
  );
  await new Promise<void>((resolve, reject) => {
    inner.once('open', () => resolve());
    inner.once('unexpected-response', (_r, res) => {
      void responseMessage(res).then((msg) => {
        const code = res.statusCode === 401 ? 502 : (res.statusCode ?? 502);
        reject(
          new SessionError(
            code,
            code === 409
              ? 'Conflict'
              : code === 429
                ? 'TooManyRequests'
                : code === 502
                  ? 'BadGateway'
                  : 'ServiceUnavailable',
            `runtimed refused the operation: ${msg}`,
          ),
        );
      });
    });
    inner.once('error', (err) =>
      reject(new SessionError(502, 'BadGateway', `runtimed session connection failed: ${err.message}`)),
    );
  });
  return inner;
}
