/**
 * The Kubernetes substrate (ADR 0020): a sandbox is a Pod named by its sandbox_ensure effect ID,
 * the Workspace's data is a PVC; "get by ID without creating" is a lookup by that name; a sandbox
 * is terminated only when its Pod is gone from the API (the node agent confirmed the process is
 * gone before the Pod object is removed).
 */
import { D, GROUP, type Workspace } from '../../lib/devws/api.ts';
import type { Operation as FnOp, State } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';

export const WORKSPACE_LABEL = `${GROUP}/workspace`;
export const SANDBOX_IMAGE = process.env.KRT_DEVWS_SANDBOX_IMAGE ?? 'bash';

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

/** The creates of sandbox_ensure (idempotent: AlreadyExists counts as done). */
export function ensureSandbox(ws: Workspace, id: string, nodeId: string): FnOp[] {
  const ns = ws.metadata.namespace ?? '';
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
      automountServiceAccountToken: false,
      containers: [
        {
          name: 'node',
          image: SANDBOX_IMAGE,
          command: ['sleep', '86400'],
          env: [{ name: 'KRT_NODE_ID', value: nodeId }],
          volumeMounts: [{ name: 'home', mountPath: '/home/dev' }],
        },
      ],
      volumes: [{ name: 'home', persistentVolumeClaim: { claimName: pvcName(ws) } }],
    },
  };
  return [
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
