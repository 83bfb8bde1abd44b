/** Running the krt CLI from the working tree, and kubeconfigs of ServiceAccounts with narrow RBAC. */
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../localenv/paths.ts';
import { renderKubeconfig } from '../localenv/kubeconfig.ts';
import { cluster, E2E_ROOT } from './cluster.ts';
import { admin } from './helpers.ts';

export function krt(args: string[], kubeconfig: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'cli/main.ts'), ...args], { env: { ...process.env, KUBECONFIG: kubeconfig }, cwd: REPO_ROOT },
      (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
  });
}

/** A kubeconfig for ServiceAccount `sa` of `ns` (created if missing) with a one-hour token. */
export async function saKubeconfig(ns: string, sa: string): Promise<string> {
  await admin().create(`/api/v1/namespaces/${ns}/serviceaccounts`, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: sa } }).catch(() => undefined);
  const tok = await admin().create<{ metadata: object; status: { token: string } }>(`/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`, { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } });
  const file = join(mkdtempSync(join(tmpdir(), 'krt-kc-')), 'config');
  writeFileSync(file, renderKubeconfig({ server: cluster().server, caFile: join(E2E_ROOT, 'pki', 'ca.crt'), token: tok.status.token, user: sa, namespace: ns }));
  return file;
}

/** A Role with one rule and its RoleBinding to ServiceAccount `sa`. */
export async function grant(ns: string, sa: string, name: string, rule: { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] }): Promise<void> {
  await admin().create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name }, rules: [rule] });
  await admin().create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: { name },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name }, subjects: [{ kind: 'ServiceAccount', name: sa, namespace: ns }] });
}
