/** Kubeconfig files with one identity each, pointing at the loopback API server. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';

export interface KubeconfigSpec {
  server: string;
  caFile: string;
  certFile?: string;
  keyFile?: string;
  token?: string;
  user: string;
  namespace?: string;
}

export function renderKubeconfig(s: KubeconfigSpec): string {
  const user: Record<string, string> = {};
  if (s.certFile) user['client-certificate'] = s.certFile;
  if (s.keyFile) user['client-key'] = s.keyFile;
  if (s.token) user.token = s.token;
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': 'kruntimes-local',
    clusters: [{ name: 'kruntimes-local', cluster: { server: s.server, 'certificate-authority': s.caFile } }],
    users: [{ name: s.user, user }],
    contexts: [
      {
        name: 'kruntimes-local',
        context: { cluster: 'kruntimes-local', user: s.user, ...(s.namespace ? { namespace: s.namespace } : {}) },
      },
    ],
  });
}

export function writeKubeconfig(path: string, s: KubeconfigSpec): string {
  writeFileSync(path, renderKubeconfig(s), { mode: 0o600 });
  return path;
}

export function pkiKubeconfig(dir: string, pki: string, server: string, stem: string, user: string): string {
  return writeKubeconfig(join(dir, `${stem}.kubeconfig`), {
    server,
    caFile: join(pki, 'ca.crt'),
    certFile: join(pki, `${stem}.crt`),
    keyFile: join(pki, `${stem}.key`),
    user,
  });
}
