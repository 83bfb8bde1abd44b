/**
 * The end of artifact cleanup that does not depend on a Runtime Pod. A deleted Run's artifacts are
 * deleted by a runtimed of its Runtime (runtimed/artifact-gc.ts), which holds the store's
 * credentials or volume, or by this function with its own credentials (ADR 0022):
 * - S3 stores covered by the Secret kruntimes-system/kruntimes-artifact-gc (bucket and endpoint
 *   bound in it; only this function's ServiceAccount may read it): the function deletes the Run's
 *   prefix itself (operation deleteRunArtifacts) and then removes the finalizer; at once when no
 *   Pod of the Runtime exists, HANDOFF_MS after the deletion otherwise (runtimed usually finishes
 *   first). A failed deletion is retried with backoff and keeps the finalizer, up to GIVE_UP_MS.
 * - any other store (Filesystem PVCs, S3 stores the Secret does not cover): it says why on the Run
 *   and releases the finalizer after a bound, leaving the bytes (named in a Warning Event):
 *   no Pod of the Run's Runtime: condition ArtifactCleanup=False/NoRuntimePod at once, release
 *   ORPHAN_AFTER_MS after deletion; Pods exist but the cleanup has not finished GIVE_UP_MS after
 *   deletion: release with ArtifactCleanupTimeout.
 * So a Run never blocks a namespace deletion for longer than GIVE_UP_MS.
 * runtimed's ServiceAccount and RoleBinding carry the same finalizer (runtime-controller): a
 * namespace deletion removes them in the same pass as the Runs, and runtimed draining on SIGTERM
 * needs both to delete the bytes. This function releases them once no Run of the namespace
 * carries the artifact-cleanup finalizer any more.
 */
import { eventOp, involvedOf } from '../../lib/fn/events.ts';
import { R } from '../../lib/fn/resources.ts';
import type {
  DeleteRunArtifactsOp,
  FunctionDef,
  ObjectRef,
  Operation,
  ReconcileInput,
  Resource,
  State,
} from '../../lib/fn/types.ts';
import { GC_SECRET_NAME, notCovered, parseGcSecret, type S3Location } from '../../lib/artifacts/gc-credentials.ts';
import { runKeyPrefix } from '../../lib/artifacts/keys.ts';
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
export const HANDOFF_MS = 10_000;
/** Where the function's store credentials live (the platform namespace). */
export const GC_SECRET_NAMESPACE = process.env.POD_NAMESPACE ?? 'kruntimes-system';
export const CONDITION = 'ArtifactCleanup';

interface Store {
  driver?: string;
  filesystem?: { volumeClaimName?: string };
  s3?: { bucket?: string; prefix?: string; endpoint?: string; region?: string; forcePathStyle?: boolean };
}
export interface RunObj extends KubeObject {
  spec: { runtime: string };
  status?: { artifactStore?: Store; conditions?: Condition[]; [k: string]: unknown };
}

export type GcVerdict =
  | { kind: 'ignore' }
  | { kind: 'delete'; store: S3Location }
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

/**
 * The Run's S3 store when this function's credentials may delete from it: bucket and endpoint
 * bound in the Secret, prefix and key derivable (no '..' or empty segments). Pure.
 */
export function gcStore(run: RunObj, secret: KubeObject | undefined): S3Location | undefined {
  const s3 = run.status?.artifactStore?.s3;
  if (run.status?.artifactStore?.driver !== 's3' || !s3?.bucket || !secret) return undefined;
  const creds = parseGcSecret((secret as { data?: Record<string, string> }).data);
  const store: S3Location = {
    bucket: s3.bucket,
    ...(s3.prefix ? { prefix: s3.prefix } : {}),
    ...(s3.endpoint ? { endpoint: s3.endpoint } : {}),
    ...(s3.region ? { region: s3.region } : {}),
    ...(s3.forcePathStyle ? { forcePathStyle: true } : {}),
  };
  if ('problem' in creds || notCovered(creds, store)) return undefined;
  try {
    runKeyPrefix(store.prefix, run.metadata.namespace ?? '', run.metadata.uid ?? '');
  } catch {
    return undefined;
  }
  return store;
}

/** What to do about one Run, given how many Pods its Runtime has and the store this function may clean. Pure. */
export function judgeRun(run: RunObj, runtimePods: number, now: number, store?: S3Location): GcVerdict {
  const deleted = Date.parse(run.metadata.deletionTimestamp ?? '');
  if (!Number.isFinite(deleted) || !(run.metadata.finalizers ?? []).includes(FINALIZER)) return { kind: 'ignore' };
  if (store && now < deleted + GIVE_UP_MS) {
    const at = deleted + HANDOFF_MS;
    if (runtimePods === 0 || now >= at) return { kind: 'delete', store };
    return { kind: 'wait', reason: '', message: '', recheckAt: at };
  }
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

function dropFinalizer(run: RunObj): Operation {
  return {
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
  };
}

/** Delete the bytes, then (only if that succeeded: operations apply in order) release the finalizer. */
export function deleteOps(run: RunObj, store: S3Location): Operation[] {
  const op: DeleteRunArtifactsOp = {
    op: 'deleteRunArtifacts',
    store,
    namespace: run.metadata.namespace ?? '',
    runUID: run.metadata.uid ?? '',
    credentials: { namespace: GC_SECRET_NAMESPACE, name: GC_SECRET_NAME },
  };
  return [op, dropFinalizer(run)];
}

function releaseOps(run: RunObj, v: Extract<GcVerdict, { kind: 'release' }>, now: Date): Operation[] {
  return [
    dropFinalizer(run),
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
  const secret = state.get(R.secrets, GC_SECRET_NAMESPACE, GC_SECRET_NAME);
  const ops: Operation[] = [];
  let recheck: number | undefined;
  for (const run of state.list(R.runs, ns) as RunObj[]) {
    if (run.spec?.runtime !== runtime) continue;
    const v = judgeRun(run, pods, now.getTime(), gcStore(run, secret));
    if (v.kind === 'delete') ops.push(...deleteOps(run, v.store));
    else if (v.kind === 'wait') {
      ops.push(...waitOps(run, v, now));
      recheck = Math.min(recheck ?? Infinity, v.recheckAt);
    } else if (v.kind === 'release') ops.push(...releaseOps(run, v, now));
  }
  if (recheck !== undefined) ops.push({ op: 'requeue', afterMs: Math.max(1000, recheck - now.getTime() + 100) });
  return ops;
}

/** The credentials Secret is read (live, by name) only for a key with a deleted S3 Run waiting for cleanup. */
export function secretRefs({ key, state }: { key: string; state: State }): ObjectRef[] {
  const [ns = '', runtime = ''] = key.split('/');
  if (!runtime) return [];
  const waiting = (state.list(R.runs, ns) as RunObj[]).some(
    (r) =>
      r.spec?.runtime === runtime &&
      !!r.metadata.deletionTimestamp &&
      (r.metadata.finalizers ?? []).includes(FINALIZER) &&
      r.status?.artifactStore?.driver === 's3',
  );
  return waiting ? [{ resource: R.secrets, namespace: GC_SECRET_NAMESPACE, name: GC_SECRET_NAME }] : [];
}

/** The keys whose invocation reads a Run (IgnoreDecl.readBy): a Run that holds the cleanup finalizer
 * matters to its namespace's identity release and, once deleted, to its Runtime's key; no other Run
 * matters, so an invocation never visits the namespace's other (e.g. 10,000 retained) Runs. */
export function gcReadBy(o: KubeObject): string[] {
  if (!(o.metadata.finalizers ?? []).includes(FINALIZER)) return [];
  const ns = o.metadata.namespace ?? '';
  if (!o.metadata.deletionTimestamp) return [`${ns}/`];
  return [...new Set([`${ns}/`, `${ns}/${(o as RunObj).spec?.runtime ?? ''}`])];
}

const fn: FunctionDef = {
  name: 'run-artifact-gc',
  description:
    "Deletes a deleted Run's S3 artifacts with its own credentials, or says why it waits and releases its finalizer when no runtimed can clean up within a bound.",
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
    fetch: { resources: [R.secrets], refs: secretRefs },
    ignore: [{ resource: R.runs, when: (o, key) => !gcReadBy(o).includes(key), readBy: gcReadBy }],
  },
  concurrency: 2,
  rbac: [
    { apiGroups: ['kruntimes.io'], resources: ['runs'], verbs: ['get', 'list', 'watch', 'patch'] },
    { apiGroups: ['kruntimes.io'], resources: ['runs/status'], verbs: ['get', 'update', 'patch'] },
    { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: [''], resources: ['events'], verbs: ['create'] },
    { apiGroups: [''], resources: ['serviceaccounts'], verbs: ['get', 'list', 'watch', 'patch'] },
    { apiGroups: ['rbac.authorization.k8s.io'], resources: ['rolebindings'], verbs: ['get', 'list', 'watch', 'patch'] },
    // Its own store credentials (ADR 0022): read by name, nothing else of the platform namespace.
    {
      apiGroups: [''],
      resources: ['secrets'],
      verbs: ['get'],
      resourceNames: [GC_SECRET_NAME],
      scope: 'namespace',
    },
  ],
  handler: collect,
};
export default fn;
