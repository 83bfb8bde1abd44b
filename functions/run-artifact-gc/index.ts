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
 * runtimed's ServiceAccount and RoleBinding carry the same finalizer (runtime-controller): a
 * namespace deletion removes them in the same pass as the Runs, and runtimed draining on SIGTERM
 * needs both to delete the bytes. This function releases them once no Run of the namespace
 * carries the artifact-cleanup finalizer any more.
 */
import { eventOp, involvedOf } from '../../lib/fn/events.ts';
import { R } from '../../lib/fn/resources.ts';
import type { FunctionDef, Operation, ReconcileInput, Resource, State } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { setCondition, type Condition } from '../../lib/run/conditions.ts';
import { IDENTITY_FINALIZER } from '../runtime-controller/index.ts';
import { RUNTIMED_SA } from '../runtime-controller/render.ts';

const roleBindings: Resource = {
  group: 'rbac.authorization.k8s.io',
  version: 'v1',
  resource: 'rolebindings',
  kind: 'RoleBinding',
  namespaced: true,
};
const PART_OF = 'app.kubernetes.io/part-of=kruntimes';

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

/** Releases runtimed's ServiceAccount and RoleBinding of a namespace being emptied once no Run needs cleanup. */
export function releaseIdentity(ns: string, state: State): Operation[] {
  const held = [R.serviceAccounts, roleBindings].flatMap((resource) => {
    const o = state.get(resource, ns, RUNTIMED_SA);
    const waiting = !!o?.metadata.deletionTimestamp && (o.metadata.finalizers ?? []).includes(IDENTITY_FINALIZER);
    return waiting && o ? [{ resource, o }] : [];
  });
  if (!held.length) return [];
  const holding = (state.list(R.runs, ns) as RunObj[]).some((r) => (r.metadata.finalizers ?? []).includes(FINALIZER));
  // Poll while Runs hold (their last change may reach another informer's cache after ours).
  if (holding) return [{ op: 'requeue', afterMs: 5_000 }];
  const ops: Operation[] = [];
  for (const { resource, o } of held) {
    ops.push({
      op: 'patch',
      resource,
      namespace: ns,
      name: RUNTIMED_SA,
      patch: {
        metadata: {
          resourceVersion: o.metadata.resourceVersion,
          finalizers: (o.metadata.finalizers ?? []).filter((f) => f !== IDENTITY_FINALIZER),
        },
      },
    });
  }
  return ops;
}

export function collect({ key, state, now }: ReconcileInput): Operation[] {
  const [ns = '', runtime = ''] = key.split('/');
  if (!runtime) return releaseIdentity(ns, state);
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
    keys: (o) => [`${o.metadata.namespace}/${(o as RunObj).spec?.runtime ?? ''}`, `${o.metadata.namespace}/`],
    filter: (e) => e.type === 'deleted' || !!e.object.metadata.deletionTimestamp,
    also: [
      ...[R.serviceAccounts, roleBindings].map((resource) => ({
        resource,
        labelSelector: PART_OF,
        map: (o: KubeObject) => (o.metadata.name === RUNTIMED_SA ? [`${o.metadata.namespace}/`] : []),
      })),
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
    { apiGroups: [''], resources: ['serviceaccounts'], verbs: ['get', 'list', 'watch', 'patch'] },
    { apiGroups: ['rbac.authorization.k8s.io'], resources: ['rolebindings'], verbs: ['get', 'list', 'watch', 'patch'] },
  ],
  handler: collect,
};
export default fn;
