/**
 * devws-controller (ADR 0020): the seed's Controller for developer workspaces. Keys: an
 * Operation's namespace/name, `@proj:<ns>/<name>` and `@ws:<ns>/<name>`. The lease epoch is the
 * relay Lease's leaseTransitions, read with a live GET on every invocation.
 */
import { D, GROUP, type Operation, type Project, type Workspace } from '../../lib/devws/api.ts';
import type { FunctionDef, Operation as FnOp, ReconcileInput } from '../../lib/fn/types.ts';
import { splitKey } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { isUnfinished } from '../../lib/devws/operations.ts';
import {
  contextFor,
  initProject,
  initWorkspace,
  leaseEpoch,
  nodeHealth,
  reconcileOperation,
  type LeaseLike,
} from './core.ts';
import { WORKSPACE_LABEL } from './substrate.ts';

const RELAY_NS = process.env.POD_NAMESPACE ?? 'kruntimes-system';
const RELAY_LEASE = 'kruntimes-relay';
const GIT_SERVER = process.env.KRT_DEVWS_GIT_SERVER_URL || undefined;

export function handle({ key, object, state, now }: ReconcileInput): FnOp[] {
  if (key.startsWith('@proj:')) {
    const { namespace, name } = splitKey(key.slice(6));
    const p = state.get(D.projects, namespace, name) as Project | undefined;
    return p ? initProject(p) : [];
  }
  if (key.startsWith('@ws:')) {
    const { namespace, name } = splitKey(key.slice(4));
    const ws = state.get(D.workspaces, namespace, name) as Workspace | undefined;
    if (!ws) return [];
    const current = ws.status?.operation?.name;
    const p = state.get(D.projects, namespace, ws.spec.project) as Project | undefined;
    const init = initWorkspace(ws, p);
    if (init.length > 0 || !current) return init;
    const op = state.get(D.operations, namespace, current) as Operation | undefined;
    if (op && !isUnfinished(op)) return nodeHealth(ws, state, now);
    return op ? handle({ key: `${namespace ?? ''}/${current}`, object: op, state, now }) : [];
  }
  const op = object as Operation | undefined;
  if (!op) return [];
  const lease = state.get(D.leases, RELAY_NS, RELAY_LEASE) as LeaseLike | undefined;
  const ctx = contextFor(op, state, now, leaseEpoch(lease), GIT_SERVER);
  return ctx ? reconcileOperation(ctx) : [{ op: 'requeue', afterMs: 2000 }];
}

const wsKey = (o: KubeObject): string[] => [`@ws:${o.metadata.namespace ?? ''}/${o.metadata.name ?? ''}`];

const fn: FunctionDef = {
  name: 'devws-controller',
  description:
    'Drives developer workspace Operations (create, start, stop, restart, delete) step by step on the Kubernetes substrate (sandbox Pod, data PVC), with effects keyed by ID and the relay Lease epoch.',
  trigger: {
    type: 'watch',
    resource: D.operations,
    also: [
      { resource: D.projects, map: (o) => [`@proj:${o.metadata.namespace ?? ''}/${o.metadata.name ?? ''}`] },
      { resource: D.workspaces, map: wsKey },
      {
        resource: D.pods,
        labelSelector: WORKSPACE_LABEL,
        map: (o) => [`@ws:${o.metadata.namespace ?? ''}/${o.metadata.labels?.[WORKSPACE_LABEL] ?? ''}`],
      },
      {
        resource: D.pvcs,
        labelSelector: WORKSPACE_LABEL,
        map: (o) => [`@ws:${o.metadata.namespace ?? ''}/${o.metadata.labels?.[WORKSPACE_LABEL] ?? ''}`],
      },
    ],
    fetch: {
      resources: [D.leases],
      refs: () => [{ resource: D.leases, namespace: RELAY_NS, name: RELAY_LEASE }],
    },
  },
  concurrency: 4,
  rbac: [
    {
      apiGroups: [GROUP],
      resources: ['projects', 'workspaces', 'operations'],
      verbs: ['get', 'list', 'watch', 'create'],
    },
    {
      apiGroups: [GROUP],
      resources: ['projects/status', 'workspaces/status', 'operations/status'],
      verbs: ['get', 'update', 'patch'],
    },
    {
      apiGroups: [''],
      resources: ['pods', 'persistentvolumeclaims'],
      verbs: ['get', 'list', 'watch', 'create', 'delete'],
    },
    {
      apiGroups: ['coordination.k8s.io'],
      resources: ['leases'],
      verbs: ['get'],
      resourceNames: [RELAY_LEASE],
      scope: 'namespace',
    },
  ],
  handler: handle,
};
export default fn;
