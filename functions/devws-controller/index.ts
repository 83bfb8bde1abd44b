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
  type GitServerConfig,
  type LeaseLike,
} from './core.ts';
import { NODE_CLUSTER_ROLE } from '../../lib/devws/node-report.ts';
import { WORKSPACE_LABEL } from './substrate.ts';

const RELAY_NS = process.env.POD_NAMESPACE ?? 'kruntimes-system';
const RELAY_LEASE = 'kruntimes-relay';
/**
 * The Git Server: the ConfigMap kruntimes-devws in the relay's namespace (gitServerUrl,
 * gitServerCA), else KRT_DEVWS_GIT_SERVER_URL; neither: clone steps block git_server_unconfigured.
 */
export const CONFIG_MAP = 'kruntimes-devws';

interface ConfigMapLike {
  data?: Record<string, string>;
}

export function gitServerConfig(cm: ConfigMapLike | undefined, env: NodeJS.ProcessEnv): GitServerConfig {
  const url = cm?.data?.gitServerUrl || env.KRT_DEVWS_GIT_SERVER_URL || undefined;
  const ca = cm?.data?.gitServerCA || undefined;
  return { ...(url ? { url } : {}), ...(ca ? { ca } : {}) };
}

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
  const cm = state.get(D.configMaps, RELAY_NS, CONFIG_MAP) as ConfigMapLike | undefined;
  const ctx = contextFor(op, state, now, leaseEpoch(lease), gitServerConfig(cm, process.env));
  if (ctx) return reconcileOperation(ctx);
  // A finished Operation outlives its Project (delete_project's record): nothing left to do.
  return isUnfinished(op) ? [{ op: 'requeue', afterMs: 2000 }] : [];
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
      resources: [D.leases, D.configMaps],
      refs: () => [
        { resource: D.leases, namespace: RELAY_NS, name: RELAY_LEASE },
        { resource: D.configMaps, namespace: RELAY_NS, name: CONFIG_MAP },
      ],
    },
  },
  concurrency: 4,
  rbac: [
    {
      apiGroups: [GROUP],
      resources: ['projects', 'workspaces', 'operations'],
      verbs: ['get', 'list', 'watch', 'create'],
    },
    // delete_project: once it succeeded, the Project and its Workspaces go.
    { apiGroups: [GROUP], resources: ['projects', 'workspaces'], verbs: ['delete'] },
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
    { apiGroups: [''], resources: ['configmaps'], verbs: ['get'], resourceNames: [CONFIG_MAP], scope: 'namespace' },
    // The Node's namespaced identity (substrate.ts nodeIdentity): bound, never granted by the controller itself.
    { apiGroups: [''], resources: ['serviceaccounts'], verbs: ['get', 'create', 'patch'] },
    { apiGroups: ['rbac.authorization.k8s.io'], resources: ['rolebindings'], verbs: ['get', 'create', 'patch'] },
    {
      apiGroups: ['rbac.authorization.k8s.io'],
      resources: ['clusterroles'],
      verbs: ['bind'],
      resourceNames: [NODE_CLUSTER_ROLE],
    },
  ],
  handler: handle,
};
export default fn;
