/**
 * Run scheduler: binds Pending Runs to Runtime Pods of the same Runtime and namespace.
 * One queue key per namespace/runtime, so a single invocation plans the whole FIFO backlog
 * of a Runtime against usage derived from Run status (never from memory); bindings are
 * status writes guarded by resourceVersion. Woken by Run changes (new Runs, capacity
 * released), Runtime Pod changes and PersistentWorkspace changes, never by polling.
 */
import { eventOp, involvedOf } from '../../lib/fn/events.ts';
import { R } from '../../lib/fn/resources.ts';
import type { FunctionDef, Operation, ReconcileInput, Resource } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { setCondition, getCondition, type Condition } from '../../lib/run/conditions.ts';
import { ACTIVE, isTerminal, terminalFailure, type RunStatus } from '../../lib/run/phases.ts';
import { heartbeatOnly } from '../../lib/run/heartbeat.ts';
import { usageOnly } from '../workspace-controller/lifecycle.ts';
import { backoffMs, type RetryPolicy } from '../../lib/run/retry.ts';
import { DEFAULT_HEARTBEAT_STALE_MS, planBatch, type RunView, type RuntimePod, type WorkspaceView } from './core.ts';

const nodes: Resource = { group: '', version: 'v1', resource: 'nodes', kind: 'Node', namespaced: false };

interface RunObj extends KubeObject {
  spec: {
    runtime: string;
    cancelRequested?: boolean;
    retryPolicy?: RetryPolicy;
    resources?: { requests?: Record<string, string> };
    affinity?: unknown;
    workspace?: { name: string };
  };
  status?: RunStatus;
}
interface PodObj extends KubeObject {
  spec: { nodeName?: string };
  status?: { phase?: string; conditions?: { type: string; status: string; lastProbeTime?: string }[] };
}
interface WsObj extends KubeObject {
  spec: { runtime: string };
  status?: { phase?: WorkspaceView['phase']; boundPod?: string; boundPodUID?: string };
}

const isPending = (r: RunObj): boolean => !r.metadata.deletionTimestamp && (r.status?.phase ?? 'Pending') === 'Pending';

export function runView(r: RunObj): RunView {
  return {
    name: r.metadata.name ?? '',
    namespace: r.metadata.namespace ?? '',
    uid: r.metadata.uid ?? '',
    labels: r.metadata.labels ?? {},
    creationTimestamp: r.metadata.creationTimestamp ?? '',
    phase: r.status?.phase ?? 'Pending',
    ...(r.status?.assignedPod ? { assignedPod: r.status.assignedPod } : {}),
    requests: r.spec.resources?.requests ?? {},
    ...(r.spec.affinity ? { affinity: r.spec.affinity } : {}),
    ...(r.spec.workspace ? { workspace: { name: r.spec.workspace.name } } : {}),
  };
}

export function podView(p: PodObj, nodeLabels: Record<string, string> | undefined): RuntimePod {
  const cond = (t: string): { status: string; lastProbeTime?: string } | undefined =>
    p.status?.conditions?.find((c) => c.type === t);
  const rr = cond('kruntimes.io/RuntimedReady');
  return {
    name: p.metadata.name ?? '',
    uid: p.metadata.uid ?? '',
    namespace: p.metadata.namespace ?? '',
    ...(p.spec.nodeName ? { nodeName: p.spec.nodeName } : {}),
    ...(nodeLabels ? { nodeLabels } : {}),
    phase: p.status?.phase ?? '',
    deleting: !!p.metadata.deletionTimestamp,
    podReady: cond('Ready')?.status === 'True',
    ...(rr
      ? { runtimedReady: { status: rr.status, ...(rr.lastProbeTime ? { lastProbeTime: rr.lastProbeTime } : {}) } }
      : {}),
    annotations: p.metadata.annotations ?? {},
  };
}

const statusOp = (run: RunObj, status: RunStatus): Operation => ({
  op: 'status',
  resource: R.runs,
  object: { ...run, status },
});

/** When a retried Run may be scheduled again (upstream pendingRetryDelay). */
function retryAt(r: RunObj): number | undefined {
  const attempt = r.status?.attempt ?? 1;
  const c = getCondition(r.status?.conditions, 'Running');
  if (attempt <= 1 || c?.status !== 'False') return undefined;
  return Date.parse(c.lastTransitionTime) + backoffMs(r.spec.retryPolicy, attempt);
}

function waitingStatus(run: RunObj, message: string): RunStatus | undefined {
  const s = run.status ?? {};
  if (s.phase === 'Pending' && s.message === message) return undefined;
  return { ...s, phase: 'Pending', message };
}

/** Runs get Events for problems only (not for every bind), so the hot path stays at three writes per Run. */
function runEvent(run: RunObj, type: 'Normal' | 'Warning', reason: string, message: string, now: Date): Operation {
  return eventOp(
    involvedOf(run, 'kruntimes.io/v1alpha1', 'Run'),
    { type, reason, message, key: message },
    now,
    'kruntimes-scheduler',
  );
}

function bound(run: RunObj, pod: RuntimePod, now: string): RunStatus {
  const conditions: Condition[] = setCondition(
    run.status?.conditions,
    { type: 'Scheduled', status: 'True', reason: 'Assigned', message: `assigned to runtime pod ${pod.name}` },
    now,
  );
  return {
    ...(run.status ?? {}),
    phase: 'Scheduled',
    assignedPod: pod.name,
    assignedPodUID: pod.uid,
    message: `assigned to runtime pod ${pod.name}`,
    conditions,
  };
}

/** The scheduler's view of the PersistentWorkspaces of a namespace, by name. */
function workspaceViews(list: WsObj[]): Map<string, WorkspaceView> {
  return new Map(
    list.map((w) => [
      w.metadata.name ?? '',
      {
        name: w.metadata.name ?? '',
        runtime: w.spec.runtime,
        ...(w.status?.phase ? { phase: w.status.phase } : {}),
        ...(w.status?.boundPod ? { boundPod: w.status.boundPod } : {}),
        ...(w.status?.boundPodUID ? { boundPodUID: w.status.boundPodUID } : {}),
        ...(w.metadata.deletionTimestamp ? { deleting: true } : {}),
      },
    ]),
  );
}

export function schedule({ key, state, now }: ReconcileInput): Operation[] {
  const [ns = '', runtime = ''] = key.split('/');
  const nowIso = now.toISOString();
  const runs = (state.list(R.runs, ns) as RunObj[]).filter((r) => r.spec.runtime === runtime);
  const ops: Operation[] = [];
  let requeueAt: number | undefined;
  const pending: RunObj[] = [];
  for (const r of runs.filter(isPending)) {
    if (r.spec.cancelRequested) {
      ops.push(
        statusOp(r, terminalFailure(r.status ?? {}, nowIso, 'Cancelled', 'cancelled by user')),
        runEvent(r, 'Normal', 'Cancelled', 'cancelled by user before it was scheduled', now),
      );
      continue;
    }
    const at = retryAt(r);
    if (at !== undefined && at > now.getTime()) {
      requeueAt = Math.min(requeueAt ?? Infinity, at);
      continue;
    }
    pending.push(r);
  }
  // No sort here: planBatch orders the pending Runs itself (FIFO) and its plan does not depend on their order.
  if (pending.length) {
    const byName = new Map(pending.map((r) => [r.metadata.name, r]));
    const nodeLabels = (n?: string): Record<string, string> | undefined =>
      n ? state.get(nodes, undefined, n)?.metadata.labels : undefined;
    const pods = (state.list(R.pods, ns, { runtime }) as PodObj[]).map((p) => podView(p, nodeLabels(p.spec.nodeName)));
    const workspaces = workspaceViews(state.list(R.persistentWorkspaces, ns) as WsObj[]);
    const active = runs.filter((r) => ACTIVE.has(r.status?.phase ?? '') && r.status?.assignedPod).map(runView);
    const plan = planBatch({ runtime, pending: pending.map(runView), active, pods, workspaces, now });
    for (const b of plan.bind)
      ops.push(statusOp(byName.get(b.run.name)!, bound(byName.get(b.run.name)!, b.pod, nowIso)));
    for (const f of plan.fail) {
      const r = byName.get(f.run.name)!;
      ops.push(
        statusOp(r, terminalFailure(r.status ?? {}, nowIso, f.reason, f.message)),
        runEvent(r, 'Warning', f.reason, f.message, now),
      );
    }
    for (const w of plan.wait) {
      const r = byName.get(w.run.name)!;
      const st = waitingStatus(r, w.message);
      if (st) ops.push(statusOp(r, st), runEvent(r, 'Warning', 'FailedScheduling', w.message, now));
    }
  }
  if (requeueAt !== undefined) ops.push({ op: 'requeue', afterMs: Math.max(1, requeueAt - now.getTime()) });
  return ops;
}

/** Whether a Run belongs to the Runtime of a namespace/runtime key. */
const ofRuntime = (r: KubeObject, key: string): boolean =>
  `${r.metadata.namespace ?? ''}/${(r as RunObj).spec?.runtime ?? ''}` === key;

const runtimeKey = (o: KubeObject): string[] => {
  const rt = (o as RunObj).spec?.runtime;
  return rt ? [`${o.metadata.namespace}/${rt}`] : [];
};

/** What the scheduler reads of a Run for a namespace/runtime key: not a finished one (ignore). */
export const schedulerIgnores = (r: KubeObject, key: string): boolean =>
  isTerminal((r as RunObj).status?.phase) || !ofRuntime(r, key);

/** The only key that may read a Run: its Runtime's, while it is not finished (schedulerIgnores). */
export const schedulerReadBy = (r: KubeObject): string[] =>
  isTerminal((r as RunObj).status?.phase) ? [] : [`${r.metadata.namespace ?? ''}/${(r as RunObj).spec?.runtime ?? ''}`];

const fn: FunctionDef = {
  name: 'run-scheduler',
  description: 'Binds Pending Runs to ready Runtime Pods with free capacity, affinity and workspace fencing.',
  trigger: {
    type: 'watch',
    resource: R.runs,
    keys: runtimeKey,
    // Wake on new or changed pending Runs and on capacity released (an active Run ending or going away).
    filter: (e) => {
      const now = e.object as RunObj;
      const wasActive = ACTIVE.has((e.old as RunObj | undefined)?.status?.phase ?? '');
      if (e.type === 'deleted') return ACTIVE.has(now.status?.phase ?? '') || isPending(now);
      return isPending(now) || (wasActive && !ACTIVE.has(now.status?.phase ?? ''));
    },
    also: [
      {
        resource: R.pods,
        // Runtime Pods only (the platform's label, not the generic `runtime` selector label).
        labelSelector: 'kruntimes.io/runtime',
        map: (p) => [`${p.metadata.namespace}/${p.metadata.labels?.['kruntimes.io/runtime'] ?? ''}`],
        // Not on runtimed's every heartbeat (every 5 s per Pod): the handler reads it when it runs.
        filter: (e, nowMs) => !heartbeatOnly(e, nowMs, DEFAULT_HEARTBEAT_STALE_MS),
      },
      // Not on a workspace's lastUsedTime alone (twice per step boundary): it decides nothing here.
      { resource: R.persistentWorkspaces, map: runtimeKey, filter: (e) => !usageOnly(e) },
      { resource: nodes, map: () => [] },
    ],
    // The handler reads only the pending and active Runs of the key's Runtime; without this every
    // invocation over a transport would carry the namespace's finished Runs until their TTL.
    // readBy: the relay indexes Runs by it, so an invocation visits only those Runs, not every
    // finished Run of the namespace (its cost stays flat as finished Runs are retained; issue 17).
    ignore: [{ resource: R.runs, when: schedulerIgnores, readBy: schedulerReadBy }],
  },
  concurrency: 4,
  rbac: [
    { apiGroups: ['kruntimes.io'], resources: ['runs', 'persistentworkspaces'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: ['kruntimes.io'], resources: ['runs/status'], verbs: ['get', 'update', 'patch'] },
    { apiGroups: [''], resources: ['pods', 'nodes'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: [''], resources: ['events'], verbs: ['create'] },
  ],
  handler: schedule,
};
export default fn;
