/**
 * The substrate adapter (ADR 0020, seed 002 "Substrate"): what the controller's steps ask of the
 * thing that runs sandboxes and holds workspace data. Two implementations, chosen per Project
 * (`spec.substrate`, immutable): Kubernetes (below: a sandbox is a Pod named by its sandbox_ensure
 * effect ID, the Workspace's data is a PVC; "get by ID without creating" is a lookup by that name;
 * a sandbox is terminated only when its Pod is gone from the API, the node agent having confirmed
 * the process is gone before the Pod object is removed) and OpenSandbox (opensandbox.ts).
 *
 * The steps decide synchronously over what the substrate observed before the decision; the
 * substrate's calls are returned as host operations (Kubernetes) or run after the decision by the
 * handler (OpenSandbox), never before the effect that asks for them is durably planned.
 */
import { D, GROUP, type Effect, type Workspace } from '../../lib/devws/api.ts';
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

/** A sandbox as the substrate shows it, found by its instance ID (the sandbox_ensure effect ID). */
export interface SandboxView {
  /** The instance ID. */
  id: string;
  /** The substrate's own ID (the Pod name; the OpenSandbox sandbox ID); recorded as the effect's externalId. */
  externalId: string;
  /** Running: its Node may be live. */
  ready: boolean;
  /** Confirmed terminated: its processes will not touch the Workspace's data again. */
  terminated: boolean;
  nodeId?: string;
  /** The Pod's UID (the delete precondition). */
  uid?: string;
}

/** Whether a create for a planned effect may be sent now (substrates without an idempotency key). */
export type CreateGate = 'send' | 'wait' | 'renew';

export interface Substrate {
  readonly kind: 'kubernetes' | 'opensandbox';
  /** Get by ID without creating: undefined when the substrate has no sandbox with this instance ID. */
  sandbox(id: string): SandboxView | undefined;
  /**
   * May a create for this effect be sent now? Kubernetes: always (the name is the idempotency
   * key). OpenSandbox: only within the window after the effect's sentAt; after it, wait until a
   * create sent in the window has had time to land, then a new sentAt ('renew').
   */
  createGate(e: Effect, now: Date): CreateGate;
  /** Fields a newly planned effect carries (OpenSandbox: sentAt, the plan is the intent to send). */
  planFields(now: Date): Partial<Effect>;
  /** The calls that make the sandbox exist; `planned` is the effect as durably recorded (undefined: not yet). */
  ensure(ws: Workspace, id: string, o: SandboxOptions, planned: Effect | undefined): FnOp[];
  terminate(v: SandboxView): FnOp[];
  /** Whether the Workspace's data still exists (`effect`: its workspace_data_delete, when planned). */
  hasData(ws: Workspace, effect: Effect | undefined): boolean;
  /** The calls that delete the Workspace's data (`planned`: the effect as durably recorded). */
  deleteData(ws: Workspace, planned: Effect): FnOp[];
}

const podView = (p: Pod): SandboxView => ({
  id: p.metadata.name ?? '',
  externalId: p.metadata.name ?? '',
  ready: sandboxReady(p),
  terminated: false,
  ...(p.metadata.annotations?.[`${GROUP}/node-id`] ? { nodeId: p.metadata.annotations[`${GROUP}/node-id`] } : {}),
  ...(p.metadata.uid ? { uid: p.metadata.uid } : {}),
});

/** The Kubernetes substrate over the function's watched state (Pods and PVCs labelled by Workspace). */
export function kubernetesSubstrate(state: State, ns: string): Substrate {
  return {
    kind: 'kubernetes',
    sandbox: (id) => {
      const p = getSandbox(state, ns, id);
      return p ? podView(p) : undefined;
    },
    createGate: () => 'send',
    planFields: () => ({}),
    ensure: (ws, id, o) => ensureSandbox(ws, id, o),
    terminate: (v) => [terminateSandbox(ns, v.externalId, v.uid)],
    hasData: (ws) => !!getData(state, ns, ws),
    deleteData: (ws) => [deleteData(ws)],
  };
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
}

const SA_TOKEN_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
const TOKEN_VOLUME = 'devws-node-token';
export const HOME = '/home/dev';

/** A Node identity: ServiceAccount `name` bound to the Node ClusterRole (get/patch Workspaces, get Operations). */
export function nodeBinding(ns: string, name: string, labels: Record<string, string>): FnOp[] {
  return [
    { op: 'apply', resource: D.serviceAccounts, object: { metadata: { name, namespace: ns, labels } } },
    {
      op: 'apply',
      resource: D.roleBindings,
      object: {
        metadata: { name, namespace: ns, labels },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: NODE_CLUSTER_ROLE },
        subjects: [{ kind: 'ServiceAccount', name, namespace: ns }],
      },
    },
  ];
}

/** The Node's identity in the namespace (Kubernetes substrate): one ServiceAccount for every sandbox Pod. */
export function nodeIdentity(ns: string): FnOp[] {
  return nodeBinding(ns, NODE_SA, {
    'app.kubernetes.io/part-of': 'kruntimes',
    'app.kubernetes.io/component': 'devws-node',
  });
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
