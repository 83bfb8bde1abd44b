/**
 * Job acceptance: resolves the JobClass (explicit, namespace default, single global default),
 * freezes it with UIDs in status.resolvedJobClass, checks the class, namespace, resource policy,
 * Secret/ConfigMap references and controller-specific allowances, writes Accepted and the
 * effective resources (with an Event per transition), and deletes finished Jobs after
 * ttlSecondsAfterFinished. Accepted Jobs belong to their class's adapter function.
 * Dependency changes wake the affected pending Jobs through @class:/@ns: keys; Secrets and
 * ConfigMaps are read by name at each evaluation (never listed, watched or cached: a cluster-wide
 * ConfigMap cache would let anyone who may create ConfigMaps exhaust the extension server).
 */
import { R } from '../../lib/fn/resources.ts';
import type { FunctionDef, ObjectRef, Operation, ReconcileInput, State } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { X, type Job } from '../../lib/jobclass/api.ts';
import { jobValueRefs } from '../../lib/jobclass/envrefs.ts';
import { isAccepted, isFinished } from '../../lib/jobclass/jobs.ts';
import { pendingJobs, reconcileJob } from './core.ts';

/** The Jobs an invocation evaluates: the keyed Job, or the pending Jobs a dependency key wakes. */
function jobsFor(key: string, object: KubeObject | undefined, state: State): Job[] | undefined {
  if (key.startsWith('@class:')) return pendingJobs(state);
  if (key.startsWith('@ns:')) return pendingJobs(state, key.slice(4));
  return undefined;
}

export function handle({ key, object, state, now }: ReconcileInput): Operation[] {
  const batch = jobsFor(key, object, state);
  if (batch) return batch.flatMap((j) => reconcileJob(j, state, now)).filter((op) => op.op !== 'requeue');
  return reconcileJob(object as Job | undefined, state, now);
}

/** The Secrets and ConfigMaps an invocation reads by name (env and image pull Secrets of Jobs not accepted yet). */
export function secretRefs({
  key,
  object,
  state,
}: {
  key: string;
  object: KubeObject | undefined;
  state: State;
}): ObjectRef[] {
  const jobs = jobsFor(key, object, state) ?? (object ? [object as Job] : []);
  return jobs
    .filter((j) => !isAccepted(j.status) && !isFinished(j.status) && !j.metadata.deletionTimestamp)
    .flatMap(jobValueRefs);
}

const fn: FunctionDef = {
  name: 'jobclass-jobs',
  description:
    'Resolves and freezes the JobClass of each Job, decides Accepted with effective resources, and applies ttlSecondsAfterFinished.',
  trigger: {
    type: 'watch',
    resource: X.jobs,
    also: [
      { resource: X.jobClasses, map: (o) => [`@class:${o.metadata.name ?? ''}`] },
      { resource: X.kubernetesParameters, map: () => ['@class:*'] },
      { resource: X.openSandboxParameters, map: () => ['@class:*'] },
      { resource: X.namespaces, map: (o) => [`@ns:${o.metadata.name ?? ''}`] },
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
