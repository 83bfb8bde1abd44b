/**
 * Job acceptance: resolves the JobClass (explicit, namespace default, single global default),
 * freezes it with UIDs in status.resolvedJobClass, checks the class, namespace, resource policy,
 * Secret/ConfigMap references and controller-specific allowances, writes Accepted and the
 * effective resources (with an Event per transition), and deletes finished Jobs after
 * ttlSecondsAfterFinished. Accepted Jobs belong to their class's adapter function.
 * Dependency changes wake the affected pending Jobs under their own keys; Secrets and
 * ConfigMaps are read by name at each evaluation (never listed, watched or cached: a cluster-wide
 * ConfigMap cache would let anyone who may create ConfigMaps exhaust the extension server).
 */
import { R } from '../../lib/fn/resources.ts';
import {
  keyOf,
  type FunctionDef,
  type ObjectRef,
  type Operation,
  type ReconcileInput,
  type State,
} from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { X, type Job } from '../../lib/jobclass/api.ts';
import { jobValueRefs } from '../../lib/jobclass/envrefs.ts';
import { isAccepted, isFinished } from '../../lib/jobclass/jobs.ts';
import { pendingJobs, reconcileJob } from './core.ts';

export function handle({ object, state, now }: ReconcileInput): Operation[] {
  return reconcileJob(object as Job | undefined, state, now);
}

/** The Secrets and ConfigMaps an invocation reads by name (env and image pull Secrets of a Job not accepted yet). */
export function secretRefs({ object }: { key: string; object: KubeObject | undefined; state: State }): ObjectRef[] {
  const j = object as Job | undefined;
  if (!j || isAccepted(j.status) || isFinished(j.status) || j.metadata.deletionTimestamp) return [];
  return jobValueRefs(j);
}

/**
 * A dependency change wakes the pending Jobs it may decide under their own keys (the queue runs
 * one key at a time, so one invocation at a time decides a Job; see the OpenSandbox adapter).
 */
const wakePending =
  (namespace?: (o: KubeObject) => string) =>
  (o: KubeObject, state: State): string[] =>
    pendingJobs(state, namespace?.(o)).map(keyOf);

const fn: FunctionDef = {
  name: 'jobclass-jobs',
  description:
    'Resolves and freezes the JobClass of each Job, decides Accepted with effective resources, and applies ttlSecondsAfterFinished.',
  trigger: {
    type: 'watch',
    resource: X.jobs,
    also: [
      { resource: X.jobClasses, map: wakePending() },
      { resource: X.kubernetesParameters, map: wakePending() },
      { resource: X.openSandboxParameters, map: wakePending() },
      { resource: X.namespaces, map: wakePending((ns) => ns.metadata.name ?? '') },
    ],
    // Secrets and ConfigMaps are read by name (never listed or watched); a Job waiting for one
    // re-checks on its own (SECRET_RECHECK_MS).
    fetch: { resources: [R.secrets, R.configMaps], refs: secretRefs },
  },
  concurrency: 4,
  rbac: [
    { apiGroups: ['execution.ayatori.ddupan.top'], resources: ['jobs'], verbs: ['get', 'list', 'watch', 'delete'] },
    { apiGroups: ['execution.ayatori.ddupan.top'], resources: ['jobs/status'], verbs: ['get', 'update', 'patch'] },
    {
      apiGroups: ['execution.ayatori.ddupan.top'],
      resources: ['jobclasses', 'kubernetesexecutionparameters', 'opensandboxexecutionparameters'],
      verbs: ['get', 'list', 'watch'],
    },
    { apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: [''], resources: ['secrets', 'configmaps'], verbs: ['get'] },
    { apiGroups: [''], resources: ['events'], verbs: ['create'] },
  ],
  handler: handle,
};
export default fn;
