/**
 * Runtime controller: materialises each Runtime as a DaemonSet (or Deployment) of Runtime Pods
 * with the runtimed sidecar, least-privilege RBAC for runtimed in the namespace, a NetworkPolicy
 * that admits only the extension API server to runtimed's session port (and anyone to the Runtime
 * Gateway's port, where every call is authorised with the caller's token), and reports ready replicas and a Ready condition.
 */
import { R } from '../../lib/fn/resources.ts';
import type { FunctionDef, Operation, ReconcileInput, Resource } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import {
  RUNTIME_LABEL,
  RUNTIMED_CLUSTER_ROLE,
  SESSION_PORT,
  GATEWAY_PORT,
  RUNTIMED_SA,
  selectorLabels,
  workload,
  workloadName,
  type Runtime,
} from './render.ts';

/** Keeps runtimed's identity and RoleBinding while deleted Runs of the namespace still need their
 * artifacts cleaned (a namespace deletion removes them in the same pass as the Runs); released by
 * run-artifact-gc (docs/adr/0011-run-fencing-and-artifact-cleanup.md). */
export const IDENTITY_FINALIZER = 'kruntimes.io/artifact-cleanup';

const networkPolicies: Resource = {
  group: 'networking.k8s.io',
  version: 'v1',
  resource: 'networkpolicies',
  kind: 'NetworkPolicy',
  namespaced: true,
};
const roleBindings: Resource = {
  group: 'rbac.authorization.k8s.io',
  version: 'v1',
  resource: 'rolebindings',
  kind: 'RoleBinding',
  namespaced: true,
};

/** The only ingress a Runtime Pod admits: the extension API server to runtimed's session port (seed 004). */
export const sessionIngress = {
  from: [
    {
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kruntimes-system' } },
      podSelector: { matchLabels: { 'app.kubernetes.io/name': 'kruntimes-extension' } },
    },
  ],
  ports: [{ protocol: 'TCP', port: SESSION_PORT }],
};

/** The Runtime Gateway admits any source: every call carries a Kubernetes token the gateway checks (ADR 0017). */
export const gatewayIngress = { ports: [{ protocol: 'TCP', port: GATEWAY_PORT }] };

type Workload = KubeObject & {
  status?: { readyReplicas?: number; numberReady?: number; desiredNumberScheduled?: number; replicas?: number };
};

function readiness(w: Workload | undefined): { ready: number; desired: number } {
  if (!w) return { ready: 0, desired: 0 };
  if (w.kind === 'DaemonSet' || w.status?.desiredNumberScheduled !== undefined)
    return { ready: w.status?.numberReady ?? 0, desired: w.status?.desiredNumberScheduled ?? 0 };
  return { ready: w.status?.readyReplicas ?? 0, desired: w.status?.replicas ?? 0 };
}

function statusOp(rt: Runtime, w: Workload | undefined, now: Date): Operation {
  const { ready, desired } = readiness(w);
  const ok = ready > 0;
  const prev = (
    rt.status?.conditions as { type: string; status: string; lastTransitionTime: string }[] | undefined
  )?.find((c) => c.type === 'Ready');
  const status = ok ? 'True' : 'False';
  const condition = {
    type: 'Ready',
    status,
    observedGeneration: rt.metadata.generation ?? 0,
    reason: ok ? 'RuntimePodsReady' : 'RuntimePodsNotReady',
    message: ok ? `${ready}/${desired} Runtime Pods ready` : `waiting for Runtime Pods: ${ready}/${desired} ready`,
    lastTransitionTime: prev?.status === status ? prev.lastTransitionTime : now.toISOString(),
  };
  return {
    op: 'apply',
    resource: R.runtimes,
    subresource: 'status',
    object: {
      metadata: { name: rt.metadata.name, namespace: rt.metadata.namespace },
      status: { readyReplicas: ready, conditions: [condition] },
    },
  };
}

export function reconcileRuntime({ object, state, now }: ReconcileInput): Operation[] {
  const rt = object as Runtime | undefined;
  if (!rt || rt.metadata.deletionTimestamp) return [];
  const ns = rt.metadata.namespace;
  const { kind, object: wl } = workload(rt);
  const ops: Operation[] = [
    {
      op: 'apply',
      resource: R.serviceAccounts,
      object: {
        metadata: {
          name: RUNTIMED_SA,
          namespace: ns,
          labels: { 'app.kubernetes.io/part-of': 'kruntimes', 'app.kubernetes.io/component': 'runtimed' },
          finalizers: [IDENTITY_FINALIZER],
        },
      },
    },
    {
      op: 'apply',
      resource: roleBindings,
      object: {
        metadata: {
          name: RUNTIMED_SA,
          namespace: ns,
          labels: { 'app.kubernetes.io/part-of': 'kruntimes' },
          finalizers: [IDENTITY_FINALIZER],
        },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: RUNTIMED_CLUSTER_ROLE },
        subjects: [{ kind: 'ServiceAccount', name: RUNTIMED_SA, namespace: ns }],
      },
    },
    { op: 'apply', resource: kind === 'DaemonSet' ? R.daemonSets : R.deployments, object: wl },
    {
      op: 'apply',
      resource: networkPolicies,
      object: {
        metadata: { name: workloadName(rt), namespace: ns, ownerReferences: wl.metadata.ownerReferences },
        spec: {
          podSelector: { matchLabels: selectorLabels(rt) },
          policyTypes: ['Ingress'],
          ingress: [sessionIngress, gatewayIngress],
        },
      },
    },
  ];
  const other = kind === 'DaemonSet' ? R.deployments : R.daemonSets;
  if (state.get(other, ns, workloadName(rt)))
    ops.push({ op: 'delete', resource: other, namespace: ns, name: workloadName(rt) });
  ops.push(statusOp(rt, state.get(kind === 'DaemonSet' ? R.daemonSets : R.deployments, ns, workloadName(rt)), now));
  return ops;
}

const toRuntime = (o: KubeObject): string[] => {
  const name = o.metadata.labels?.[RUNTIME_LABEL];
  return name ? [`${o.metadata.namespace}/${name}`] : [];
};

const fn: FunctionDef = {
  name: 'runtime-controller',
  description: 'Materialises Runtimes as DaemonSets/Deployments of Runtime Pods running runtimed.',
  trigger: {
    type: 'watch',
    resource: R.runtimes,
    also: [
      { resource: R.daemonSets, labelSelector: RUNTIME_LABEL, map: toRuntime },
      { resource: R.deployments, labelSelector: RUNTIME_LABEL, map: toRuntime },
    ],
  },
  concurrency: 2,
  rbac: [
    { apiGroups: ['kruntimes.io'], resources: ['runtimes'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: ['kruntimes.io'], resources: ['runtimes/status'], verbs: ['get', 'patch', 'update'] },
    {
      apiGroups: ['apps'],
      resources: ['daemonsets', 'deployments'],
      verbs: ['get', 'list', 'watch', 'create', 'patch', 'update', 'delete'],
    },
    { apiGroups: [''], resources: ['serviceaccounts'], verbs: ['get', 'create', 'patch'] },
    { apiGroups: ['rbac.authorization.k8s.io'], resources: ['rolebindings'], verbs: ['get', 'create', 'patch'] },
    {
      apiGroups: ['rbac.authorization.k8s.io'],
      resources: ['clusterroles'],
      verbs: ['bind'],
      resourceNames: [RUNTIMED_CLUSTER_ROLE],
    },
    { apiGroups: ['networking.k8s.io'], resources: ['networkpolicies'], verbs: ['get', 'create', 'patch'] },
  ],
  handler: reconcileRuntime,
};
export default fn;
