/**
 * PersistentWorkspace controller: binds RuntimePodLocal workspaces to Runtime Pods, marks them
 * Lost when the bound Pod goes away, tracks lastUsedTime from the Runs that reference them, and
 * drives the cleanup protocol. The only writer of workspace status. Keyed per namespace/runtime.
 */
import { R } from '../../lib/fn/resources.ts';
import type { FunctionDef, Operation, ReconcileInput } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { isTerminal } from '../../lib/run/phases.ts';
import { decide, WORKSPACE_FINALIZER, type PodView, type Workspace } from './lifecycle.ts';

type PodObj = KubeObject & { status?: { phase?: string; conditions?: { type: string; status: string }[] } };
type RunObj = KubeObject & { spec: { runtime?: string; workspace?: { name: string } }; status?: { phase?: string } };

export function podViews(pods: PodObj[]): PodView[] {
  return pods.map((p) => ({
    name: p.metadata.name ?? '',
    uid: p.metadata.uid ?? '',
    deleting: !!p.metadata.deletionTimestamp,
    phase: p.status?.phase ?? '',
    ready: !!p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
  }));
}

/** The workspace's finalizers set to `finalizers`, guarded by the resourceVersion decided on. */
function finalizersPatch(ws: Workspace, finalizers: string[]): Operation {
  const m = ws.metadata;
  return {
    op: 'patch',
    resource: R.persistentWorkspaces,
    namespace: m.namespace,
    name: m.name ?? '',
    patch: { metadata: { resourceVersion: m.resourceVersion, finalizers } },
  };
}

const addFinalizer = (ws: Workspace): Operation =>
  finalizersPatch(ws, [...(ws.metadata.finalizers ?? []), WORKSPACE_FINALIZER]);

function opsFor(ws: Workspace, d: ReturnType<typeof decide>): Operation[] {
  if (d.kind !== 'finalizeAndBind') {
    const op = opFor(ws, d);
    return op ? [op] : [];
  }
  // The finalizer patch is guarded by the resourceVersion the decision was made on; the status that
  // follows it in the same invocation cannot be (the patch moved it on), so it is written whole,
  // as the only writer of workspace status does.
  const m = ws.metadata;
  return [
    addFinalizer(ws),
    {
      op: 'patch',
      resource: R.persistentWorkspaces,
      namespace: m.namespace,
      name: m.name ?? '',
      subresource: 'status',
      patchType: 'json',
      patch: [{ op: 'add', path: '/status', value: d.status }],
    },
  ];
}

function opFor(ws: Workspace, d: ReturnType<typeof decide>): Operation | undefined {
  const m = ws.metadata;
  switch (d.kind) {
    case 'status':
      return { op: 'status', resource: R.persistentWorkspaces, object: { ...ws, status: d.status } };
    case 'addFinalizer':
      return addFinalizer(ws);
    case 'removeFinalizer':
      return finalizersPatch(
        ws,
        (m.finalizers ?? []).filter((f) => f !== WORKSPACE_FINALIZER),
      );
    case 'delete':
      return { op: 'delete', resource: R.persistentWorkspaces, namespace: m.namespace, name: m.name ?? '', uid: m.uid };
    default:
      return undefined;
  }
}

export function reconcileWorkspaces({ key, state, now }: ReconcileInput): Operation[] {
  const [ns = '', runtime = ''] = key.split('/');
  const pods = podViews(state.list(R.pods, ns, { runtime }));
  const runs = (state.list(R.runs, ns) as RunObj[]).filter(
    (r) => r.spec.workspace && !isTerminal(r.status?.phase) && !r.metadata.deletionTimestamp,
  );
  const ops: Operation[] = [];
  for (const ws of (state.list(R.persistentWorkspaces, ns) as Workspace[]).filter((w) => w.spec.runtime === runtime)) {
    const active = runs.filter((r) => r.spec.workspace?.name === ws.metadata.name).length;
    ops.push(...opsFor(ws, decide(ws, pods, active, now)));
  }
  return ops;
}

const byRuntime = (o: KubeObject): string[] => {
  const rt = (o as { spec?: { runtime?: string } }).spec?.runtime;
  return rt ? [`${o.metadata.namespace}/${rt}`] : [];
};

/** The only key that reads a Run: its Runtime's, while it uses a workspace and is neither finished
 * nor being deleted (what reconcileWorkspaces counts; admission keeps a Run on its workspace's Runtime). */
export const workspaceReadBy = (r: KubeObject): string[] => {
  const run = r as RunObj;
  return run.spec?.workspace && !isTerminal(run.status?.phase) && !run.metadata.deletionTimestamp ? byRuntime(r) : [];
};

const fn: FunctionDef = {
  name: 'workspace-controller',
  description: 'Binds PersistentWorkspaces to Runtime Pods, detects loss, tracks use and drives cleanup.',
  trigger: {
    type: 'watch',
    resource: R.persistentWorkspaces,
    keys: byRuntime,
    also: [
      {
        resource: R.pods,
        labelSelector: 'runtime',
        map: (p) => [`${p.metadata.namespace}/${p.metadata.labels?.runtime ?? ''}`],
      },
      { resource: R.runs, map: (r) => ((r as RunObj).spec?.workspace ? byRuntime(r) : []) },
    ],
    // Only the key's active workspace Runs are read; the relay indexes them (readBy), so an
    // invocation does not visit every Run of the namespace (issue 17).
    ignore: [{ resource: R.runs, when: (r, key) => !workspaceReadBy(r).includes(key), readBy: workspaceReadBy }],
  },
  concurrency: 2,
  rbac: [
    {
      apiGroups: ['kruntimes.io'],
      resources: ['persistentworkspaces'],
      verbs: ['get', 'list', 'watch', 'patch', 'update', 'delete'],
    },
    { apiGroups: ['kruntimes.io'], resources: ['persistentworkspaces/status'], verbs: ['get', 'update', 'patch'] },
    { apiGroups: ['kruntimes.io'], resources: ['runs'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
  ],
  handler: reconcileWorkspaces,
};
export default fn;
