/**
 * The extension API server's link to a runtimed session port: where it is and which certificate
 * to expect (from the Runtime Pod's kruntimes.io/SessionServer condition), a TLS socket pinned to
 * that fingerprint before anything is sent, and the bound ServiceAccount token that proves who
 * is calling (ADR 0007). Used by sessions.kruntimes.io and by artifacts.kruntimes.io downloads
 * from Filesystem stores.
 */
import type { IncomingMessage } from 'node:http';
import tls, { type TLSSocket } from 'node:tls';
import { readBody, type KubeClient } from '../../lib/kube/client.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { SESSION_AUDIENCE, SESSION_CONDITION } from '../../lib/session/relay.ts';

export type PodObj = KubeObject & {
  status?: { podIP?: string; conditions?: { type: string; status: string; message?: string }[] };
};

/** Where runtimed's session port is and the certificate fingerprint it published, from its Pod. */
export function sessionEndpoint(pod: PodObj): { host: string; port: number; fingerprint: string } | string {
  const c = pod.status?.conditions?.find((x) => x.type === SESSION_CONDITION && x.status === 'True');
  const m = /port=(\d+) sha256=([0-9A-F:]{95})/.exec(c?.message ?? '');
  if (!m?.[1] || !m[2]) return `runtimed on Runtime Pod ${pod.metadata.name} has not published its session port yet`;
  if (!pod.status?.podIP) return `Runtime Pod ${pod.metadata.name} has no IP`;
  return { host: pod.status.podIP, port: Number(m[1]), fingerprint: m[2] };
}

/** Bound ServiceAccount tokens for the sessions audience, requested through TokenRequest and reused until 80% of their life. */
export class SessionTokens {
  private cached?: { token: string; refreshAt: number };
  constructor(
    private readonly client: KubeClient,
    private readonly namespace: string,
    private readonly serviceAccount: string,
    private readonly now: () => number = Date.now,
  ) {}

  async get(): Promise<string> {
    if (this.cached && this.now() < this.cached.refreshAt) return this.cached.token;
    const ttl = 600;
    const res = await this.client.create<KubeObject & { status?: { token?: string } }>(
      `/api/v1/namespaces/${this.namespace}/serviceaccounts/${this.serviceAccount}/token`,
      {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { audiences: [SESSION_AUDIENCE], expirationSeconds: ttl },
      },
    );
    const token = res.status?.token;
    if (!token) throw new Error('TokenRequest returned no token');
    this.cached = { token, refreshAt: this.now() + ttl * 800 };
    return token;
  }
}

/** A TLS connection to runtimed whose certificate fingerprint was checked before anything is sent. */
function pinnedSocket(host: string, port: number, fingerprint: string): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({
      host,
      port,
      rejectUnauthorized: false,
      minVersion: 'TLSv1.2',
      ALPNProtocols: ['http/1.1'],
    });
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`connecting to ${host}:${port} timed out`));
    }, 5000);
    s.once('secureConnect', () => {
      clearTimeout(timer);
      const got = s.getPeerCertificate().fingerprint256;
      if (got !== fingerprint) {
        s.destroy();
        reject(
          new Error(
            `runtimed at ${host}:${port} presented a certificate that does not match its Pod's published fingerprint`,
          ),
        );
        return;
      }
      resolve(s);
    });
    s.once('error', (err: Error) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

/** The link could not be opened (no published endpoint, unreachable, or a fingerprint mismatch). */
export class LinkError extends Error {}

/** An authenticated, pinned connection to the runtimed of `pod`: its endpoint, a token to send, and the verified socket. */
export async function openLink(
  pod: PodObj,
  tokens: SessionTokens,
): Promise<{ host: string; port: number; token: string; socket: TLSSocket }> {
  const ep = sessionEndpoint(pod);
  if (typeof ep === 'string') throw new LinkError(ep);
  const [token, socket] = await Promise.all([
    tokens.get(),
    pinnedSocket(ep.host, ep.port, ep.fingerprint).catch((err: unknown) => {
      throw new LinkError(`cannot reach runtimed of Runtime Pod ${pod.metadata.name}: ${(err as Error).message}`);
    }),
  ]);
  return { host: ep.host, port: ep.port, token, socket };
}

/** The message of a runtimed error response (its metav1.Status message, else the body). */
export async function responseMessage(res: IncomingMessage): Promise<string> {
  const text = await readBody(res);
  try {
    return (JSON.parse(text) as { message?: string }).message ?? text;
  } catch {
    return text;
  }
}
