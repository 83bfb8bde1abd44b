/** Running the real krt CLI in e2e: as a child process with a kubeconfig, optionally feeding stdin. */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '../lib/fs/temp-dir.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import { renderKubeconfig } from '../localenv/kubeconfig.ts';
import { cluster, E2E_ROOT } from './cluster.ts';
import { admin } from './helpers.ts';

export interface KrtResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs krt; stdin (when given) is written and then closed, as a piped shell would. */
export function krt(args: string[], kubeconfig: string, stdin?: string | string[], gapMs = 50): Promise<KrtResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'cli/main.ts'), ...args], {
      env: { ...process.env, KUBECONFIG: kubeconfig },
      cwd: REPO_ROOT,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
    const chunks = stdin === undefined ? [] : Array.isArray(stdin) ? stdin : [stdin];
    void (async () => {
      for (const c of chunks) {
        child.stdin.write(c);
        await new Promise((r) => setTimeout(r, gapMs));
      }
      child.stdin.end();
    })();
  });
}

/** A kubeconfig for a ServiceAccount of the namespace (created if missing) with a 1 h token. */
export async function saKubeconfig(ns: string, sa: string): Promise<string> {
  await admin()
    .create(`/api/v1/namespaces/${ns}/serviceaccounts`, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: sa },
    })
    .catch(() => undefined);
  const tok = await admin().create<{ metadata: object; status: { token: string } }>(
    `/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`,
    { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } },
  );
  const file = join(tempDir('krt-kc-'), 'config');
  writeFileSync(
    file,
    renderKubeconfig({
      server: cluster().server,
      caFile: join(E2E_ROOT, 'pki', 'ca.crt'),
      token: tok.status.token,
      user: sa,
      namespace: ns,
    }),
  );
  return file;
}

export interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

/** A Role `name` with the rules, bound to ServiceAccount `sa`. */
export async function grant(ns: string, sa: string, name: string, ...rules: Rule[]): Promise<void> {
  await admin().create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name },
    rules,
  });
  await admin().create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
    subjects: [{ kind: 'ServiceAccount', name: sa, namespace: ns }],
  });
}
