/**
 * Stale Run reaper: a Run whose assigned Runtime Pod is gone, replaced, terminating, not ready
 * or whose runtimed heartbeat is stale is retried elsewhere (back to Pending, next attempt)
 * when its retry policy allows, otherwise it fails with the reason. Keyed per
 * namespace/runtime and woken by Pod and Run changes.
 */
import { eventOp, involvedOf } from '../../lib/fn/events.ts';
import { R } from '../../lib/fn/resources.ts';
import type { FunctionDef, Operation, ReconcileInput } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { setCondition } from '../../lib/run/conditions.ts';
import { isTerminal, terminalFailure, type RunStatus } from '../../lib/run/phases.ts';
import { currentAttempt, shouldRetry, type RetryPolicy } from '../../lib/run/retry.ts';
import { STALE_MS } from '../../lib/run/fencing.ts';
import { heartbeatOnly } from '../../lib/run/heartbeat.ts';

/** Staleness bound: shared with runtimed's execution lease (lib/run/fencing.ts). */
export { STALE_MS };
interface RunObj extends KubeObject {
  spec: { runtime: string; retryPolicy?: RetryPolicy };
  status?: RunStatus;
}
interface PodObj extends KubeObject {
  status?: { conditions?: { type: string; status: string; lastProbeTime?: string; lastTransitionTime?: string }[] };
}

export type Verdict = { stale: false; recheckAt?: number } | { stale: true; reason: string; message: string };

export function judge(run: RunObj, pod: PodObj | undefined, now: number, staleMs = STALE_MS): Verdict {
  if (!pod) return { stale: true, reason: 'PodGone', message: 'assigned pod was deleted' };
  if (run.status?.assignedPodUID && pod.metadata.uid !== run.status.assignedPodUID)
    return { stale: true, reason: 'PodGone', message: 'assigned pod was replaced' };
  return judgeHealth(pod, now, staleMs);
}

function judgeHealth(pod: PodObj, now: number, staleMs: number): Verdict {
  if (pod.metadata.deletionTimestamp) {
    // A terminating Pod gets its grace period (runtimed may finish its Runs); when it is gone the
    // Run is PodGone; a Pod stuck terminating past the grace period plus the threshold is PodTerminating.
    const until = Date.parse(pod.metadata.deletionTimestamp) + staleMs;
    if (now < until) return { stale: false, recheckAt: until };
    return { stale: true, reason: 'PodTerminating', message: 'assigned pod is terminating' };
  }
  const ready = pod.status?.conditions?.find((c) => c.type === 'Ready');
  if (!ready) return { stale: false };
  if (ready.status !== 'True') {
    const since = Date.parse(ready.lastTransitionTime ?? '');
    if (!Number.isFinite(since) || now - since >= staleMs)
      return { stale: true, reason: 'PodUnhealthy', message: 'assigned pod is not ready' };
    return { stale: false, recheckAt: since + staleMs };
  }
  const beat = Date.parse(
    pod.status?.conditions?.find((c) => c.type === 'kruntimes.io/RuntimedReady')?.lastProbeTime ?? '',
  );
  if (!Number.isFinite(beat) || now - beat >= staleMs)
    return { stale: true, reason: 'PodUnhealthy', message: 'assigned pod runtimed heartbeat is stale' };
  return { stale: false, recheckAt: beat + staleMs };
}

/** Back to Pending for another Pod; a Ready function or session Run also loses its endpoint and Ready. */
export function reset(run: RunObj, reason: string, message: string, now: string): RunStatus {
  const s = run.status ?? {};
  const { assignedPod: _p, assignedPodUID: _u, startTime: _t, endpoint: _e, ...rest } = s;
  let conditions = setCondition(s.conditions, { type: 'Running', status: 'False', reason, message }, now);
  if (conditions.some((c) => c.type === 'Ready'))
    conditions = setCondition(conditions, { type: 'Ready', status: 'False', reason, message }, now);
  return {
    ...rest,
    phase: 'Pending',
    attempt: currentAttempt(s.attempt) + 1,
    message,
    conditions,
  };
}

/** The terminal status of a lost Run; a Ready function or session Run also loses its endpoint and Ready. */
export function ended(run: RunObj, reason: string, message: string, now: string): RunStatus {
  const { endpoint: _e, ...failed } = terminalFailure(run.status ?? {}, now, reason, message);
  if (!failed.conditions?.some((c) => c.type === 'Ready')) return failed;
  return {
    ...failed,
    conditions: setCondition(failed.conditions, { type: 'Ready', status: 'False', reason, message }, now),
  };
}

/** runtimed's finalizer on a function Run (runtimed/function-runs.ts): it unregisters the handler first. */
export const FUNCTION_FINALIZER = 'kruntimes.io/function-cleanup';

/**
 * A terminal (or deleted) function Run still holding runtimed's cleanup finalizer while it has no
 * Pod (reset for a retry) or its Pod is gone or replaced: the handler died with the Pod (or was
 * fenced) and no runtimed is left to drop the finalizer, so the reaper does (a JSON patch that
 * tests the entry first). Otherwise deleting the Run would hang.
 */
export function leftoverFinalizer(run: RunObj, pod: PodObj | undefined): Operation | undefined {
  const i = (run.metadata.finalizers ?? []).indexOf(FUNCTION_FINALIZER);
  if (i < 0 || !(isTerminal(run.status?.phase) || run.metadata.deletionTimestamp)) return undefined;
  // Still on a live Pod: its runtimed unregisters and drops the finalizer itself.
  if (run.status?.assignedPod && pod && (!run.status.assignedPodUID || pod.metadata.uid === run.status.assignedPodUID))
    return undefined;
  const path = `/metadata/finalizers/${i}`;
  return {
    op: 'patch',
    resource: R.runs,
    namespace: run.metadata.namespace ?? '',
    name: run.metadata.name ?? '',
    patchType: 'json',
    patch: [
      { op: 'test', path, value: FUNCTION_FINALIZER },
      { op: 'remove', path },
    ],
  };
}

/** A stale Run: back to Pending for a retry, or its terminal status; and the event saying why. */
function lost(run: RunObj, v: { reason: string; message: string }, now: Date): Operation[] {
  const attempt = currentAttempt(run.status?.attempt);
  const retry = shouldRetry(run.spec.retryPolicy, attempt, v.reason);
  const status = retry
    ? reset(run, v.reason, v.message, now.toISOString())
    : ended(run, v.reason, v.message, now.toISOString());
  return [
    { op: 'status', resource: R.runs, object: { ...run, status } },
    eventOp(
      involvedOf(run, 'kruntimes.io/v1alpha1', 'Run'),
      {
        type: 'Warning',
        reason: v.reason,
        message: retry ? `${v.message}; retrying (attempt ${attempt + 1})` : v.message,
        key: `${run.status?.assignedPodUID ?? run.status?.assignedPod}|${attempt}`,
      },
      now,
      'kruntimes-reaper',
    ),
  ];
}

/** A Run reap never acts on for `key`: another Runtime's, or finished without runtimed's function finalizer. */
export function unread(o: KubeObject, key: string): boolean {
  const r = o as RunObj;
  if (`${r.metadata.namespace ?? ''}/${r.spec?.runtime ?? ''}` !== key) return true;
  return isTerminal(r.status?.phase) && !r.metadata.finalizers?.includes(FUNCTION_FINALIZER);
}

/** The only key that may read a Run (the complement of `unread`): its Runtime's, unless finished without the finalizer. */
export function readBy(o: KubeObject): string[] {
  const r = o as RunObj;
  if (isTerminal(r.status?.phase) && !r.metadata.finalizers?.includes(FUNCTION_FINALIZER)) return [];
  return [`${r.metadata.namespace ?? ''}/${r.spec?.runtime ?? ''}`];
}

export function reap({ key, state, now }: ReconcileInput): Operation[] {
  const [ns = '', runtime = ''] = key.split('/');
  const ops: Operation[] = [];
  let recheck: number | undefined;
  const runs = (state.list(R.runs, ns) as RunObj[]).filter((r) => r.spec.runtime === runtime);
  const podOf = (r: RunObj): PodObj | undefined =>
    r.status?.assignedPod ? state.get(R.pods, ns, r.status.assignedPod) : undefined;
  for (const run of runs) {
    const op = leftoverFinalizer(run, podOf(run));
    if (op) ops.push(op);
  }
  const active = runs.filter(
    (r) => r.status?.assignedPod && ['Scheduled', 'Running', 'Ready'].includes(r.status.phase ?? ''),
  );
  for (const run of active) {
    const v = judge(run, podOf(run), now.getTime());
    if (!v.stale) {
      if (v.recheckAt) recheck = Math.min(recheck ?? Infinity, v.recheckAt);
      continue;
    }
    ops.push(...lost(run, v, now));
    // A function Run that ends here loses its cleanup finalizer on a later pass (after this status write).
    if (run.metadata.finalizers?.includes(FUNCTION_FINALIZER)) recheck = Math.min(recheck ?? Infinity, 0);
  }
  if (recheck !== undefined) ops.push({ op: 'requeue', afterMs: Math.max(1000, recheck - now.getTime() + 100) });
  return ops;
}

const fn: FunctionDef = {
  name: 'run-reaper',
  description:
    'Retries or fails Runs whose Runtime Pod is gone, terminating, unready or has a stale runtimed heartbeat.',
  trigger: {
    type: 'watch',
    resource: R.runs,
    keys: (o) => [`${o.metadata.namespace}/${(o as RunObj).spec?.runtime ?? ''}`],
    // Wake when a Run becomes assigned (to start watching its Pod); Pod events and requeues do the rest.
    // Also a terminal Run holding runtimed's function finalizer (leftoverFinalizer).
    filter: (e) => {
      const active = (o?: KubeObject): boolean =>
        ['Scheduled', 'Running', 'Ready'].includes((o as RunObj | undefined)?.status?.phase ?? '');
      const leftover = (o?: KubeObject): boolean =>
        !!o?.metadata.finalizers?.includes(FUNCTION_FINALIZER) &&
        (isTerminal((o as RunObj).status?.phase) || !!o.metadata.deletionTimestamp);
      return (active(e.object) && !active(e.old)) || leftover(e.object);
    },
    also: [
      {
        resource: R.pods,
        // Runtime Pods only (the platform's label, not the generic `runtime` selector label).
        labelSelector: 'kruntimes.io/runtime',
        map: (p) => [`${p.metadata.namespace}/${p.metadata.labels?.['kruntimes.io/runtime'] ?? ''}`],
        // Not on runtimed's every heartbeat (every 5 s per Pod): the handler reads it when it runs.
        filter: (e, nowMs) => !heartbeatOnly(e, nowMs, STALE_MS),
      },
    ],
    // The handler reads the key's Runtime's active Runs and those holding the function finalizer;
    // finished ones without it would only weigh on every invocation over a transport.
    // readBy lets the relay index Runs so an invocation visits only these (issue 17).
    ignore: [{ resource: R.runs, when: unread, readBy }],
  },
  concurrency: 2,
  rbac: [
    // patch: only to drop runtimed's function finalizer of a Run whose Pod is gone (leftoverFinalizer).
    { apiGroups: ['kruntimes.io'], resources: ['runs'], verbs: ['get', 'list', 'watch', 'patch'] },
    { apiGroups: ['kruntimes.io'], resources: ['runs/status'], verbs: ['get', 'update', 'patch'] },
    { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: [''], resources: ['events'], verbs: ['create'] },
  ],
  handler: reap,
};
export default fn;
