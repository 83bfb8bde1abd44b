/**
 * The Kubernetes substrate (ADR 0020): a sandbox is a Pod named by its sandbox_ensure effect ID,
 * the Workspace's data is a PVC; "get by ID without creating" is a lookup by that name; a sandbox
 * is terminated only when its Pod is gone from the API (the node agent confirmed the process is
 * gone before the Pod object is removed).
 */
import { D, GROUP, type Workspace } from '../../lib/devws/api.ts';
import type { Operation as FnOp, State } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { NODE_CLUSTER_ROLE, NODE_SA } from '../../lib/devws/node-report.ts';
import { GIT_AUDIENCE, GIT_TOKEN_FILE } from '../../lib/devws/git-access.ts';

export const WORKSPACE_LABEL = `${GROUP}/workspace`;
export const SANDBOX_IMAGE = process.env.KRT_DEVWS_SANDBOX_IMAGE ?? 'bash';
/** The Node agent's image: the kruntimes image (`kruntimes devws-node`), as runtimed's. */
export const NODE_IMAGE = process.env.KRT_DEVWS_NODE_IMAGE ?? 'ghcr.io/kruntimes/kruntimes:0.1.0';
/** Both sandbox containers run as the kruntimes image's non-root user, so they share the home volume. */
export const NODE_UID = 65532;

export const pvcName = (ws: Workspace): string => `devws-${ws.metadata.name ?? ''}-data`;

interface Pod extends KubeObject {
  status?: { phase?: string; conditions?: { type: string; status: string }[] };
}

/** Get by ID without creating. */
export function getSandbox(state: State, ns: string, id: string): Pod | undefined {
  return state.get(D.pods, ns, id);
}

export function getData(state: State, ns: string, ws: Workspace): KubeObject | undefined {
  return state.get(D.pvcs, ns, pvcName(ws));
}

export function sandboxReady(p: Pod | undefined): boolean {
  return (
    p?.status?.phase === 'Running' && !!p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')
  );
}

export interface SandboxOptions {
  generation: number;
  /** PEM of the CA the Git Server's certificate chains to (the Node's GIT_SSL_CAINFO). */
  gitServerCA?: string;
}

const SA_TOKEN_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
const TOKEN_VOLUME = 'devws-node-token';
export const HOME = '/home/dev';

/** The Node's identity in the namespace: its ServiceAccount, bound to the Node ClusterRole (get/patch Workspaces, get Operations). */
export function nodeIdentity(ns: string): FnOp[] {
  const labels = { 'app.kubernetes.io/part-of': 'kruntimes', 'app.kubernetes.io/component': 'devws-node' };
  return [
    { op: 'apply', resource: D.serviceAccounts, object: { metadata: { name: NODE_SA, namespace: ns, labels } } },
    {
      op: 'apply',
      resource: D.roleBindings,
      object: {
        metadata: { name: NODE_SA, namespace: ns, labels },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: NODE_CLUSTER_ROLE },
        subjects: [{ kind: 'ServiceAccount', name: NODE_SA, namespace: ns }],
      },
    },
  ];
}

/** A Pod-bound token for the node container only (the dev container gets none). */
const tokenVolume = {
  name: TOKEN_VOLUME,
  projected: {
    sources: [
      { serviceAccountToken: { path: 'token', expirationSeconds: 3607 } },
      // The Git Server's credential (ADR 0026): a token only the Git Server accepts, never the API.
      { serviceAccountToken: { path: GIT_TOKEN_FILE, audience: GIT_AUDIENCE, expirationSeconds: 3607 } },
      { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
    ],
  },
};

function nodeContainer(ws: Workspace, nodeId: string, o: SandboxOptions): Record<string, unknown> {
  const field = (path: string): Record<string, unknown> => ({ valueFrom: { fieldRef: { fieldPath: path } } });
  return {
    name: 'node',
    image: NODE_IMAGE,
    args: ['devws-node'],
    env: [
      { name: 'POD_NAME', ...field('metadata.name') },
      { name: 'POD_NAMESPACE', ...field('metadata.namespace') },
      { name: 'KRT_NODE_ID', value: nodeId },
      { name: 'KRT_WORKSPACE', value: ws.metadata.name ?? '' },
      { name: 'KRT_GENERATION', value: String(o.generation) },
      { name: 'HOME', value: HOME },
      ...(o.gitServerCA ? [{ name: 'KRT_GIT_CA', value: o.gitServerCA }] : []),
    ],
    volumeMounts: [
      { name: 'home', mountPath: HOME },
      { name: TOKEN_VOLUME, mountPath: SA_TOKEN_DIR, readOnly: true },
    ],
    securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
  };
}

/** The creates of sandbox_ensure (idempotent: AlreadyExists counts as done). */
export function ensureSandbox(ws: Workspace, id: string, o: SandboxOptions): FnOp[] {
  const ns = ws.metadata.namespace ?? '';
  const nodeId = `${id}-node`;
  const labels = { [WORKSPACE_LABEL]: ws.metadata.name ?? '' };
  const pvc: KubeObject = {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: pvcName(ws), namespace: ns, labels },
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
  };
  const pod: KubeObject = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: id, namespace: ns, labels, annotations: { [`${GROUP}/node-id`]: nodeId } },
    spec: {
      restartPolicy: 'Never',
      serviceAccountName: NODE_SA,
      automountServiceAccountToken: false,
      securityContext: { runAsNonRoot: true, runAsUser: NODE_UID, runAsGroup: NODE_UID, fsGroup: NODE_UID },
      containers: [
        nodeContainer(ws, nodeId, o),
        {
          name: 'dev',
          image: SANDBOX_IMAGE,
          command: ['sleep', '86400'],
          env: [{ name: 'HOME', value: HOME }],
          volumeMounts: [{ name: 'home', mountPath: HOME }],
        },
      ],
      volumes: [{ name: 'home', persistentVolumeClaim: { claimName: pvcName(ws) } }, tokenVolume],
    },
  };
  return [
    ...nodeIdentity(ns),
    { op: 'create', resource: D.pvcs, object: pvc },
    { op: 'create', resource: D.pods, object: pod },
  ];
}

export function terminateSandbox(ns: string, id: string, uid?: string): FnOp {
  return { op: 'delete', resource: D.pods, namespace: ns, name: id, uid };
}

export function deleteData(ws: Workspace): FnOp {
  return { op: 'delete', resource: D.pvcs, namespace: ws.metadata.namespace, name: pvcName(ws) };
}
