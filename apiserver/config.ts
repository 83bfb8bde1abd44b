/** Where a TLS server of the extension (the API server, the function server) listens. */
export interface ListenConfig {
  listenAddress: string;
  httpsPort: number;
  healthAddress: string;
  healthPort: number;
  certFile: string;
  keyFile: string;
}

/** The extension API server's settings, read once from the environment. */
export interface ServerConfig extends ListenConfig {
  namespace: string;
  podName: string;
  leaderElection: boolean;
  /** Comma-separated function names to host; empty = all. */
  only: string[];
  /**
   * `required` (default): admission calls must present the API server's front-proxy client
   * certificate. `none` only where the API server's webhook client certificate cannot be configured.
   */
  admissionClientAuth: 'required' | 'none';
}

/**
 * The listening settings from KRT_LISTEN_ADDRESS, KRT_HTTPS_PORT, KRT_HEALTH_ADDRESS,
 * KRT_HEALTH_PORT, KRT_TLS_CERT and KRT_TLS_KEY; a port that is not one is refused.
 */
export function loadListenConfig(env: NodeJS.ProcessEnv, defaultAddress = '0.0.0.0'): ListenConfig {
  const port = (k: string, d: number): number => {
    const v = Number(env[k] ?? d);
    if (!Number.isInteger(v) || v < 0 || v > 65535) throw new Error(`${k} must be a port number, got ${env[k]}`);
    return v;
  };
  return {
    listenAddress: env.KRT_LISTEN_ADDRESS ?? defaultAddress,
    httpsPort: port('KRT_HTTPS_PORT', 8443),
    healthAddress: env.KRT_HEALTH_ADDRESS ?? env.POD_IP ?? '0.0.0.0',
    healthPort: port('KRT_HEALTH_PORT', 8080),
    certFile: env.KRT_TLS_CERT ?? '/etc/kruntimes/tls/tls.crt',
    keyFile: env.KRT_TLS_KEY ?? '/etc/kruntimes/tls/tls.key',
  };
}

export function loadServerConfig(env: NodeJS.ProcessEnv): ServerConfig {
  return Object.freeze({
    ...loadListenConfig(env),
    namespace: env.POD_NAMESPACE ?? 'kruntimes-system',
    podName: env.POD_NAME ?? `kruntimes-extension-${process.pid}`,
    leaderElection: env.KRT_LEADER_ELECTION !== 'false',
    admissionClientAuth: admissionClientAuth(env.KRT_ADMISSION_CLIENT_AUTH),
    only: (env.KRT_FUNCTIONS ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  });
}

function admissionClientAuth(v: string | undefined): 'required' | 'none' {
  if (v === undefined || v === '' || v === 'required') return 'required';
  if (v === 'none') return 'none';
  throw new Error(`KRT_ADMISSION_CLIENT_AUTH must be required or none, got ${v}`);
}
