/** Builds a KubeClient from a kubeconfig file or the in-cluster service account. */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { KubeConfig, User } from '@kubernetes/client-node';
import { execTokenSource, type ExecConfig } from './exec-credential.ts';
import { KubeClient } from './client.ts';

const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
const requireModule = createRequire(import.meta.url);

/**
 * @kubernetes/client-node costs about 0.9 CPU-seconds and 90 MiB to load; only kubeconfig users
 * (the CLI, the node agent) pay for it, never an in-cluster Pod.
 */
export function newKubeConfig(): KubeConfig {
  const m = requireModule('@kubernetes/client-node') as { KubeConfig: new () => KubeConfig };
  return new m.KubeConfig();
}

export function clientFromKubeconfig(path: string, userAgent?: string): KubeClient {
  const kc = newKubeConfig();
  kc.loadFromFile(path);
  return clientFromKubeConfig(kc, userAgent);
}

export function clientFromKubeConfig(kc: KubeConfig, userAgent?: string): KubeClient {
  const cluster = kc.getCurrentCluster();
  const user = kc.getCurrentUser();
  if (!cluster) throw new Error('kubeconfig has no current cluster');
  const fromData = (data?: string, file?: string): Buffer | undefined =>
    data ? Buffer.from(data, 'base64') : file ? readFileSync(file) : undefined;
  return new KubeClient({
    server: cluster.server,
    ca: fromData(cluster.caData, cluster.caFile),
    cert: fromData(user?.certData, user?.certFile),
    key: fromData(user?.keyData, user?.keyFile),
    ...tokenOf(user),
    ...(userAgent ? { userAgent } : {}),
  });
}

/** A static token, or an exec credential plugin's token (kubectl's `users[].user.exec`). */
function tokenOf(user: User | null): { token?: string | (() => string) } {
  if (user?.token) return { token: user.token };
  const exec = user?.exec as ExecConfig | undefined;
  if (exec?.command) return { token: execTokenSource(exec) };
  return {};
}

/** In-cluster config: the projected token is re-read so rotation is picked up. */
export function inClusterClient(env: NodeJS.ProcessEnv, userAgent?: string, saDir = SA_DIR): KubeClient {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT ?? '443';
  if (!host) throw new Error('not running in a cluster: KUBERNETES_SERVICE_HOST is not set');
  const h = host.includes(':') ? `[${host}]` : host;
  let cached = { at: 0, token: '' };
  const token = (): string => {
    const now = Date.now();
    if (now - cached.at > 60_000) cached = { at: now, token: readFileSync(`${saDir}/token`, 'utf8').trim() };
    return cached.token;
  };
  return new KubeClient({
    server: `https://${h}:${port}`,
    ca: readFileSync(`${saDir}/ca.crt`),
    token,
    ...(userAgent ? { userAgent } : {}),
  });
}

/** Kubeconfig when KUBECONFIG is set, otherwise in-cluster. */
export function defaultClient(env: NodeJS.ProcessEnv, userAgent?: string): KubeClient {
  return env.KUBECONFIG
    ? clientFromKubeconfig(env.KUBECONFIG.split(':')[0] ?? '', userAgent)
    : inClusterClient(env, userAgent);
}
