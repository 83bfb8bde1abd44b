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
import { R } from '../../lib/fn/resources.ts';
import { WORKSPACE_LABEL, type Substrate } from './substrate.ts';
import {
  OPENSANDBOX_SECRET,
  defaultOpenSandboxDeps,
  openSandboxConfig,
  withOpenSandbox,
  type OpenSandboxDeps,
} from './opensandbox-run.ts';

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

/** One decision; `substrate`: the Project's, observed before (default: Kubernetes over the watched state). */
export function handle({ key, object, state, now }: ReconcileInput, substrate?: Substrate): FnOp[] {
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
    if (op && !isUnfinished(op)) return nodeHealth(ws, state, now, substrate);
    return op ? handle({ key: `${namespace ?? ''}/${current}`, object: op, state, now }, substrate) : [];
  }
  const op = object as Operation | undefined;
  if (!op) return [];
  const lease = state.get(D.leases, RELAY_NS, RELAY_LEASE) as LeaseLike | undefined;
  const cm = state.get(D.configMaps, RELAY_NS, CONFIG_MAP) as ConfigMapLike | undefined;
  const ctx = contextFor(op, state, now, leaseEpoch(lease), {
    ...gitServerConfig(cm, process.env),
    ...(substrate ? { substrate } : {}),
  });
  if (ctx) return reconcileOperation(ctx);
  // A finished Operation outlives its Project (delete_project's record): nothing left to do.
  return isUnfinished(op) ? [{ op: 'requeue', afterMs: 2000 }] : [];
}

/** The Project a key's decision acts for (undefined: a Project key, which never touches the substrate). */
function projectOf({ key, object, state }: ReconcileInput): Project | undefined {
  if (key.startsWith('@proj:')) return undefined;
  if (key.startsWith('@ws:')) {
    const { namespace, name } = splitKey(key.slice(4));
    const ws = state.get(D.workspaces, namespace, name) as Workspace | undefined;
    return ws ? (state.get(D.projects, namespace, ws.spec.project) as Project | undefined) : undefined;
  }
  const op = object as Operation | undefined;
  return op ? (state.get(D.projects, op.metadata.namespace, op.spec.project) as Project | undefined) : undefined;
}

/**
 * The handler: Projects on the Kubernetes substrate decide over the watched state; on OpenSandbox
 * the Project's sandboxes are listed first and the calls run after the decision.
 */
export async function handleWithSubstrate(input: ReconcileInput, deps: OpenSandboxDeps): Promise<FnOp[]> {
  const project = projectOf(input);
  if (project?.spec.substrate !== 'opensandbox') return handle(input);
  const cm = input.state.get(D.configMaps, RELAY_NS, CONFIG_MAP) as ConfigMapLike | undefined;
  const secret = input.state.get(R.secrets, RELAY_NS, OPENSANDBOX_SECRET) as ConfigMapLike | undefined;
  const config = openSandboxConfig(cm, secret, deps.policy());
  if ('problem' in config) {
    deps.log(`Project ${project.metadata.name ?? ''}: OpenSandbox not configured: ${config.problem}`);
    return [{ op: 'requeue', afterMs: 10_000 }];
  }
  const op = input.key.startsWith('@') ? undefined : (input.object as Operation | undefined);
  const sentAtOf = (id: string): string | undefined => op?.status?.effects?.find((e) => e.id === id)?.sentAt;
  return withOpenSandbox(project, config, (sub) => handle(input, sub), {
    act: !!op,
    deps,
    now: input.now,
    sentAtOf,
  });
}

const wsKey = (o: KubeObject): string[] => [`@ws:${o.metadata.namespace ?? ''}/${o.metadata.name ?? ''}`];

const fn: FunctionDef = {
  name: 'devws-controller',
  description:
    "Drives developer workspace Operations (create, start, stop, restart, delete) step by step on the Project's substrate (Kubernetes: sandbox Pod, data PVC; or OpenSandbox), with effects keyed by ID and the relay Lease epoch.",
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
      resources: [D.leases, D.configMaps, R.secrets],
      refs: () => [
        { resource: D.leases, namespace: RELAY_NS, name: RELAY_LEASE },
        { resource: D.configMaps, namespace: RELAY_NS, name: CONFIG_MAP },
        { resource: R.secrets, namespace: RELAY_NS, name: OPENSANDBOX_SECRET },
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
    // The OpenSandbox substrate's API key, read by name at call time (ADR 0009).
    {
      apiGroups: [''],
      resources: ['secrets'],
      verbs: ['get'],
      resourceNames: [OPENSANDBOX_SECRET],
      scope: 'namespace',
    },
    // An Event for every step transition of an Operation (core.ts withEvent).
    { apiGroups: [''], resources: ['events'], verbs: ['create'] },
    // The Node's namespaced identity (substrate.ts nodeIdentity): bound, never granted by the controller itself.
    // An OpenSandbox sandbox's Node: a ServiceAccount per sandbox instance, deleted when it is terminated.
    { apiGroups: [''], resources: ['serviceaccounts'], verbs: ['get', 'create', 'patch', 'delete'] },
    {
      apiGroups: ['rbac.authorization.k8s.io'],
      resources: ['rolebindings'],
      verbs: ['get', 'create', 'patch', 'delete'],
    },
    {
      apiGroups: ['rbac.authorization.k8s.io'],
      resources: ['clusterroles'],
      verbs: ['bind'],
      resourceNames: [NODE_CLUSTER_ROLE],
    },
  ],
  handler: (input: ReconcileInput) => handleWithSubstrate(input, defaultOpenSandboxDeps()),
};
export default fn;
