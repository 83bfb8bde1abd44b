/**
 * The bounded end of artifact cleanup. A deleted Run's artifacts are deleted by a runtimed of its
 * Runtime (runtimed/artifact-gc.ts), which holds the store's credentials or volume; this function
 * holds neither. It only watches deleted Runs still carrying kruntimes.io/artifact-cleanup and,
 * when no runtimed can do the work, says so on the Run and releases the finalizer after a bound,
 * leaving the bytes in the store (named in a Warning Event and its log):
 * - no Pod of the Run's Runtime exists (the Runtime was deleted first, or its Pods are all gone):
 *   condition ArtifactCleanup=False/NoRuntimePod at once, release ORPHAN_AFTER_MS after deletion
 *   (recreating the Runtime within that time cleans the bytes after all);
 * - Pods exist but the cleanup has not finished GIVE_UP_MS after deletion (store unreachable,
 *   store changed): release with ArtifactCleanupTimeout.
 * So a Run never blocks a namespace deletion for longer than GIVE_UP_MS.
 */
import { eventOp, involvedOf } from '../../lib/fn/events.ts';
import { R } from '../../lib/fn/resources.ts';
import type { FunctionDef, Operation, ReconcileInput } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { setCondition, type Condition } from '../../lib/run/conditions.ts';

export const FINALIZER = 'kruntimes.io/artifact-cleanup';
export const ORPHAN_AFTER_MS = 60_000;
export const GIVE_UP_MS = 600_000;
export const CONDITION = 'ArtifactCleanup';

interface Store {
  driver?: string;
  filesystem?: { volumeClaimName?: string };
  s3?: { bucket?: string; prefix?: string };
}
export interface RunObj extends KubeObject {
  spec: { runtime: string };
  status?: { artifactStore?: Store; conditions?: Condition[]; [k: string]: unknown };
}

export type GcVerdict =
  | { kind: 'ignore' }
  | { kind: 'wait'; reason: string; message: string; recheckAt: number }
  | { kind: 'release'; reason: string; message: string };

/** Where the Run's bytes are, in words an administrator can act on. */
export function storeLocation(run: RunObj): string {
  const s = run.status?.artifactStore;
  const key = `namespaces/${run.metadata.namespace}/runs/${run.metadata.uid}/`;
  if (s?.s3) return `s3://${s.s3.bucket}/${s.s3.prefix ? `${s.s3.prefix.replace(/\/$/, '')}/` : ''}${key}`;
  if (s?.filesystem) return `${key} on PVC ${s.filesystem.volumeClaimName}`;
  return `${key} in the Runtime's artifact store`;
}

/** What to do about one Run, given how many Pods its Runtime has. Pure. */
export function judgeRun(run: RunObj, runtimePods: number, now: number): GcVerdict {
  const deleted = Date.parse(run.metadata.deletionTimestamp ?? '');
  if (!Number.isFinite(deleted) || !(run.metadata.finalizers ?? []).includes(FINALIZER)) return { kind: 'ignore' };
  const where = storeLocation(run);
  if (runtimePods === 0) {
    const at = deleted + ORPHAN_AFTER_MS;
    const message = `no Pod of Runtime ${run.spec.runtime} is running to delete the artifacts at ${where}`;
    if (now < at)
      return {
        kind: 'wait',
        reason: 'NoRuntimePod',
        message: `${message}; recreate the Runtime, or at ${new Date(at).toISOString()} the finalizer is released and the bytes are left in the store`,
        recheckAt: at,
      };
    return {
      kind: 'release',
      reason: 'NoRuntimePod',
      message: `${message}; released the finalizer, bytes left in the store`,
    };
  }
  const at = deleted + GIVE_UP_MS;
  if (now < at) return { kind: 'wait', reason: '', message: '', recheckAt: at };
  return {
    kind: 'release',
    reason: 'ArtifactCleanupTimeout',
    message: `the artifacts at ${where} were not deleted within ${GIVE_UP_MS / 1000}s of the Run's deletion; released the finalizer, bytes left in the store`,
  };
}

function waitOps(run: RunObj, v: Extract<GcVerdict, { kind: 'wait' }>, now: Date): Operation[] {
  if (!v.reason) return [];
  const prev = run.status?.conditions?.find((c) => c.type === CONDITION);
  if (prev?.reason === v.reason) return [];
  const conditions = setCondition(
    run.status?.conditions,
    { type: CONDITION, status: 'False', reason: v.reason, message: v.message },
    now.toISOString(),
  );
  return [{ op: 'status', resource: R.runs, object: { ...run, status: { ...run.status, conditions } } }];
}

function releaseOps(run: RunObj, v: Extract<GcVerdict, { kind: 'release' }>, now: Date): Operation[] {
  return [
    {
      op: 'patch',
      resource: R.runs,
      namespace: run.metadata.namespace ?? '',
      name: run.metadata.name ?? '',
      patch: {
        metadata: {
          resourceVersion: run.metadata.resourceVersion,
          finalizers: (run.metadata.finalizers ?? []).filter((f) => f !== FINALIZER),
        },
      },
    },
    eventOp(
      involvedOf(run, 'kruntimes.io/v1alpha1', 'Run'),
      { type: 'Warning', reason: 'ArtifactsOrphaned', message: v.message, key: 'artifacts-orphaned' },
      now,
      'kruntimes-artifact-gc',
    ),
  ];
}

export function collect({ key, state, now }: ReconcileInput): Operation[] {
  const [ns = '', runtime = ''] = key.split('/');
  const pods = state.list(R.pods, ns, { runtime }).length;
  const ops: Operation[] = [];
  let recheck: number | undefined;
  for (const run of state.list(R.runs, ns) as RunObj[]) {
    if (run.spec?.runtime !== runtime) continue;
    const v = judgeRun(run, pods, now.getTime());
    if (v.kind === 'wait') {
      ops.push(...waitOps(run, v, now));
      recheck = Math.min(recheck ?? Infinity, v.recheckAt);
    } else if (v.kind === 'release') ops.push(...releaseOps(run, v, now));
  }
  if (recheck !== undefined) ops.push({ op: 'requeue', afterMs: Math.max(1000, recheck - now.getTime() + 100) });
  return ops;
}

const fn: FunctionDef = {
  name: 'run-artifact-gc',
  description:
    'Says why a deleted Run waits for artifact cleanup and releases its finalizer when no runtimed can clean up within a bound.',
  trigger: {
    type: 'watch',
    resource: R.runs,
    keys: (o) => [`${o.metadata.namespace}/${(o as RunObj).spec?.runtime ?? ''}`],
    filter: (e) => !!e.object.metadata.deletionTimestamp && (e.object.metadata.finalizers ?? []).includes(FINALIZER),
    also: [
      {
        resource: R.pods,
        labelSelector: 'runtime',
        map: (p) => [`${p.metadata.namespace}/${p.metadata.labels?.runtime ?? ''}`],
      },
    ],
  },
  concurrency: 2,
  rbac: [
    { apiGroups: ['kruntimes.io'], resources: ['runs'], verbs: ['get', 'list', 'watch', 'patch'] },
    { apiGroups: ['kruntimes.io'], resources: ['runs/status'], verbs: ['get', 'update', 'patch'] },
    { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: [''], resources: ['events'], verbs: ['create'] },
  ],
  handler: collect,
};
export default fn;
