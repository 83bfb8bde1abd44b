/**
 * Request-header authentication of an aggregated API server: identity headers are trusted only
 * on connections whose client certificate chains to the aggregator's requestheader CA and whose
 * CN is in the allowed names (from ConfigMap kube-system/extension-apiserver-authentication).
 */
import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { KubeClient } from '../../lib/kube/client.ts';
import type { KubeObject } from '../../lib/kube/types.ts';

export interface RequestHeaderConfig {
  clientCA: string;
  allowedNames: string[];
  usernameHeaders: string[];
  groupHeaders: string[];
  extraPrefixes: string[];
  uidHeaders: string[];
}
export interface UserInfo {
  username: string;
  uid?: string;
  groups: string[];
  extra: Record<string, string[]>;
}

const list = (s: string | undefined, def: string[]): string[] => {
  try {
    return s ? (JSON.parse(s) as string[]) : def;
  } catch {
    return def;
  }
};

export async function loadRequestHeaderConfig(client: KubeClient): Promise<RequestHeaderConfig> {
  const cm = await client.get<KubeObject & { data?: Record<string, string> }>(
    '/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication',
  );
  const d = cm.data ?? {};
  const ca = d['requestheader-client-ca-file'];
  if (!ca)
    throw new Error(
      'extension-apiserver-authentication has no requestheader-client-ca-file: API aggregation is not configured',
    );
  return {
    clientCA: ca,
    allowedNames: list(d['requestheader-allowed-names'], []),
    usernameHeaders: list(d['requestheader-username-headers'], ['X-Remote-User']),
    groupHeaders: list(d['requestheader-group-headers'], ['X-Remote-Group']),
    extraPrefixes: list(d['requestheader-extra-headers-prefix'], ['X-Remote-Extra-']),
    uidHeaders: list(d['requestheader-uid-headers'], []),
  };
}

/**
 * Undefined when the connection presented a client certificate that chains to the requestheader
 * CA with an allowed CN (the API server's front-proxy certificate), else why not. Aggregated
 * requests and admission webhook calls both come from the API server with that certificate.
 */
export function verifyProxyCert(req: IncomingMessage, cfg: RequestHeaderConfig): string | undefined {
  const sock = req.socket as TLSSocket;
  if (!sock.authorized) return 'a client certificate signed by the requestheader CA is required';
  const cn = String(sock.getPeerCertificate().subject?.CN ?? '');
  if (cfg.allowedNames.length && !cfg.allowedNames.includes(cn))
    return `client certificate CN ${JSON.stringify(cn)} is not an allowed requestheader name`;
  return undefined;
}

/**
 * The requestheader configuration, reloaded periodically; listeners hear when the client CA
 * changes (rotation), so the TLS server can start trusting the new CA without a restart.
 */
export class RequestHeaderSource {
  private readonly caListeners: ((ca: string) => void)[] = [];
  private constructor(
    private cfg: RequestHeaderConfig,
    private readonly load: () => Promise<RequestHeaderConfig>,
  ) {}

  static async start(load: () => Promise<RequestHeaderConfig>): Promise<RequestHeaderSource> {
    return new RequestHeaderSource(await load(), load);
  }

  current(): RequestHeaderConfig {
    return this.cfg;
  }

  onClientCAChange(cb: (ca: string) => void): void {
    this.caListeners.push(cb);
  }

  /** Loads the configuration again; a failure keeps the previous one (and rejects). */
  async refresh(): Promise<void> {
    const next = await this.load();
    const changed = next.clientCA !== this.cfg.clientCA;
    this.cfg = next;
    if (changed) for (const cb of this.caListeners) cb(next.clientCA);
  }
}

/** The proxied caller, or an error message when the connection is not from the aggregator. */
export function authenticate(req: IncomingMessage, cfg: RequestHeaderConfig): UserInfo | string {
  const refused = verifyProxyCert(req, cfg);
  if (refused) return refused;
  // headersDistinct: a header sent once per value (X-Remote-Group for each group) stays a list;
  // req.headers would join them into one "a, b" string and lose every group.
  const header = (name: string): string[] => req.headersDistinct[name.toLowerCase()] ?? [];
  const username = cfg.usernameHeaders.flatMap(header)[0];
  if (!username) return 'no user in the request headers';
  const extra: Record<string, string[]> = {};
  for (const [k, v] of Object.entries(req.headersDistinct)) {
    const prefix = cfg.extraPrefixes.find((p) => k.startsWith(p.toLowerCase()));
    if (prefix && v !== undefined) extra[decodeURIComponent(k.slice(prefix.length))] = v;
  }
  const uid = cfg.uidHeaders.flatMap(header)[0];
  return { username, ...(uid ? { uid } : {}), groups: cfg.groupHeaders.flatMap(header), extra };
}
