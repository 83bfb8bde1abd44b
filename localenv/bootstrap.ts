/** Cluster objects the local environment itself needs (server-side applied, so `up` stays idempotent). */
import type { KubeClient } from '../lib/kube/client.ts';

export const PROVISIONER_USER = 'system:kruntimes:local-provisioner';
const MANAGER = 'kruntimes-local';

export async function applyBootstrap(admin: KubeClient, nodeKind?: 'agent' | 'kubelet'): Promise<void> {
  await admin.apply(
    '/apis/rbac.authorization.k8s.io/v1/clusterroles/kruntimes:local-provisioner',
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'kruntimes:local-provisioner' },
      rules: [
        { apiGroups: [''], resources: ['persistentvolumes'], verbs: ['get', 'list', 'watch', 'create', 'delete'] },
        { apiGroups: [''], resources: ['persistentvolumeclaims'], verbs: ['get', 'list', 'watch'] },
        { apiGroups: ['storage.k8s.io'], resources: ['storageclasses'], verbs: ['get', 'list', 'watch'] },
        { apiGroups: ['', 'events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
        // The kubelet kind's node-services relays to the extension Pod it finds by label.
        ...(nodeKind === 'kubelet' ? [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list'] }] : []),
      ],
    },
    MANAGER,
  );
  await admin.apply(
    '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/kruntimes:local-provisioner',
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'kruntimes:local-provisioner' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'kruntimes:local-provisioner' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: PROVISIONER_USER }],
    },
    MANAGER,
  );
  await admin.apply(
    '/apis/storage.k8s.io/v1/storageclasses/kruntimes-local',
    {
      apiVersion: 'storage.k8s.io/v1',
      kind: 'StorageClass',
      metadata: { name: 'kruntimes-local', annotations: { 'storageclass.kubernetes.io/is-default-class': 'true' } },
      provisioner: 'kruntimes.io/local-dir',
      reclaimPolicy: 'Delete',
      volumeBindingMode: 'Immediate',
    },
    MANAGER,
  );
}
