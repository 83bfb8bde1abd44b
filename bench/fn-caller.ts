/** The function benches' caller: a ServiceAccount with the namespace's `view` role (enough to invoke). */
import type { KubeClient } from '../lib/kube/client.ts';
import type { KubeObject } from '../lib/kube/types.ts';

/** Creates the ServiceAccount `caller` bound to `view` in ns and returns a one-hour token of it. */
export async function callerToken(api: KubeClient, ns: string): Promise<string> {
  await api.create(`/api/v1/namespaces/${ns}/serviceaccounts`, {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: { name: 'caller' },
  });
  await api.create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'caller' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
    subjects: [{ kind: 'ServiceAccount', name: 'caller', namespace: ns }],
  });
  const tok = await api.create<KubeObject & { status: { token: string } }>(
    `/api/v1/namespaces/${ns}/serviceaccounts/caller/token`,
    { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } },
  );
  return tok.status.token;
}
