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
import { podAudience, RUNTIMED_CONTAINER, SESSION_CONDITION, SESSION_PORT_NAME } from '../../lib/session/relay.ts';

export type PodObj = KubeObject & {
  spec?: { containers?: { name: string; ports?: { name?: string; containerPort?: number }[] }[] };
  status?: { podIP?: string; conditions?: { type: string; status: string; message?: string }[] };
};

/**
 * Where runtimed's session port is and which certificate to expect. Every part comes from a
 * source the Pod's own code cannot write: the address from status.podIP (the kubelet's; a
 * ValidatingAdmissionPolicy keeps runtimed's token off it), the port from the immutable Pod spec
 * (runtimed's `session` containerPort, rendered by the runtime-controller), and the fingerprint
 * from runtimed's own condition (only runtimed's token, mounted into runtimed's container alone,
 * may write it). The port runtimed publishes in its condition is not trusted.
 */
export function sessionEndpoint(pod: PodObj): { host: string; port: number; fingerprint: string } | string {
  const c = pod.status?.conditions?.find((x) => x.type === SESSION_CONDITION && x.status === 'True');
  const m = /sha256=([0-9A-F:]{95})(?:\s|$)/.exec(c?.message ?? '');
  if (!m?.[1]) return `runtimed on Runtime Pod ${pod.metadata.name} has not published its session port yet`;
  const port = pod.spec?.containers
    ?.find((x) => x.name === RUNTIMED_CONTAINER)
    ?.ports?.find((p) => p.name === SESSION_PORT_NAME)?.containerPort;
  if (!port) return `Runtime Pod ${pod.metadata.name} declares no ${SESSION_PORT_NAME} port on its runtimed container`;
  if (!pod.status?.podIP) return `Runtime Pod ${pod.metadata.name} has no IP`;
  return { host: pod.status.podIP, port, fingerprint: m[1] };
}

/**
 * Session tokens: one fresh TokenRequest per operation, never cached or shared between Pods. The
 * audience names the target Pod's UID (`sessions.kruntimes.io/pods/<uid>`), so runtimed of any
 * other Pod refuses it, and runtimed accepts each token once (its `jti`). A Pod in another
 * namespace cannot be the token's boundObjectRef (TokenRequest binds objects of the
 * ServiceAccount's own namespace only), hence the Pod-scoped audience (ADR 0007).
 */
export class SessionTokens {
  static readonly TTL_SECONDS = 600;
  constructor(
    private readonly client: KubeClient,
    private readonly namespace: string,
    private readonly serviceAccount: string,
  ) {}

  async forPod(pod: PodObj): Promise<string> {
    const uid = pod.metadata.uid;
    if (!uid) throw new Error(`Runtime Pod ${pod.metadata.name} has no UID`);
    const res = await this.client.create<KubeObject & { status?: { token?: string } }>(
      `/api/v1/namespaces/${this.namespace}/serviceaccounts/${this.serviceAccount}/token`,
      {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { audiences: [podAudience(uid)], expirationSeconds: SessionTokens.TTL_SECONDS },
      },
    );
    const token = res.status?.token;
    if (!token) throw new Error('TokenRequest returned no token');
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
    tokens.forPod(pod),
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
