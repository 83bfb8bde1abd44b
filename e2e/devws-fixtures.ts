/** What the developer-workspace e2e specs share: API paths, and the devws Git Server run for a spec. */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubeClient } from '../lib/kube/client.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { startHostGitServer, type RunningGitServer } from '../runtimed/devws-git-server.ts';
import { cluster, E2E_HOST_ADDRESS, E2E_ROOT } from './cluster.ts';
import { admin, upsert, type Pki } from './helpers.ts';

export const G = '/apis/dev.kruntimes.io/v1alpha1';
export const SYS = 'kruntimes-system';
export const CONFIG = `/api/v1/namespaces/${SYS}/configmaps/kruntimes-devws`;
export const SYNC_SECRET = `/api/v1/namespaces/${SYS}/secrets/kruntimes-devws-git-sync`;
export const RBAC = '/apis/rbac.authorization.k8s.io/v1';

/**
 * The devws Git Server's code, run on the host for a spec as the component runs it: repositories
 * under `root`, served with `pki`, whose CA it also trusts for the external repository (a local
 * server on this host, allowed explicitly: a sync refuses internal addresses). Every read is
 * reviewed by the cluster as `reviewer`. Its sync token is new and is stored in the sync Secret.
 */
export async function startSpecGitServer(root: string, pki: Pki, reviewer: KubeClient): Promise<RunningGitServer> {
  const syncToken = randomBytes(24).toString('hex');
  const { cert, key, ca } = pki;
  const server = await startHostGitServer({ dir: root, cert, key, ca, host: E2E_HOST_ADDRESS, syncToken, reviewer });
  await upsert(SYNC_SECRET, { metadata: { name: 'kruntimes-devws-git-sync' }, stringData: { token: syncToken } });
  return server;
}

/** Points the devws functions at a Git Server (and, for OpenSandbox, its endpoint): the kruntimes-devws ConfigMap. */
export async function configureDevws(data: Record<string, string>): Promise<void> {
  await upsert(CONFIG, { metadata: { name: 'kruntimes-devws' }, data });
}

/** A client with a sandbox Node's own identity: a kruntimes-devws-node token bound to its Pod, as its projected token is. */
export async function nodeClient(ns: string, sandbox: string): Promise<KubeClient> {
  const pod = await admin().get<KubeObject>(`/api/v1/namespaces/${ns}/pods/${sandbox}`);
  const tr = await admin().create<KubeObject & { status: { token: string } }>(
    `/api/v1/namespaces/${ns}/serviceaccounts/kruntimes-devws-node/token`,
    {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: {
        expirationSeconds: 600,
        boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.metadata.name, uid: pod.metadata.uid },
      },
    },
  );
  return new KubeClient({
    server: cluster().server,
    ca: readFileSync(join(E2E_ROOT, 'pki', 'ca.crt')),
    token: tr.status.token,
  });
}
