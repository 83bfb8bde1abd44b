/**
 * Kubernetes adapter (controllerName execution.ayatori.ddupan.top/kubernetes): runs each
 * accepted Job as a native batch/v1 Job in the Job's namespace with the parameters'
 * ServiceAccount and placement, observes it, cancels by suspending it, and relies on owner
 * references for deletion. Also protects KubernetesExecutionParameters referenced by classes.
 */
import { R } from '../../lib/fn/resources.ts';
import { keyOf, type FunctionDef, type Operation, type ReconcileInput } from '../../lib/fn/types.ts';
import {
  GROUP,
  JOB_UID_LABEL,
  KUBERNETES_CONTROLLER,
  X,
  type Job,
  type JobClass,
  type KubernetesParameters,
} from '../../lib/jobclass/api.ts';
import { protectParameters } from '../../lib/jobclass/finalizers.ts';
import { COMPONENT, isKubernetesJob, reconcileKubernetesJob, waitingJobs } from './core.ts';

export function handle({ key, object, state, now }: ReconcileInput): Operation[] {
  if (key.startsWith('@params:')) {
    const params = state.get(X.kubernetesParameters, undefined, key.slice(8)) as KubernetesParameters | undefined;
    return protectParameters(X.kubernetesParameters, params, state.list(X.jobClasses) as JobClass[], now, COMPONENT);
  }
  return reconcileKubernetesJob(object as Job | undefined, state, now);
}

const fn: FunctionDef = {
  name: 'jobclass-kubernetes',
  description: 'Kubernetes JobClass adapter: runs accepted Jobs as owned batch/v1 Jobs, observes and cancels them.',
  trigger: {
    type: 'watch',
    resource: X.jobs,
    filter: (e) => isKubernetesJob(e.object as Job),
    also: [
      {
        resource: X.batchJobs,
        labelSelector: JOB_UID_LABEL,
        map: (o) =>
          (o.metadata.ownerReferences ?? [])
            .filter((r) => r.kind === 'Job' && r.apiVersion.startsWith(`${GROUP}/`))
            .map((r) => `${o.metadata.namespace ?? ''}/${r.name}`),
      },
      // A ServiceAccount or class change wakes the Jobs waiting for it under their own keys: the
      // queue runs one key at a time, so one invocation at a time acts for a Job.
      {
        resource: R.serviceAccounts,
        map: (o, state) => waitingJobs(state, (j) => j.metadata.namespace === o.metadata.namespace).map(keyOf),
      },
      {
        resource: X.jobClasses,
        map: (o, state) => {
          const c = o as JobClass;
          if (c.spec.controllerName !== KUBERNETES_CONTROLLER) return [];
          const waiting = waitingJobs(state, (j) => j.status?.resolvedJobClass?.name === c.metadata.name);
          return [...waiting.map(keyOf), `@params:${c.spec.parametersRef.name}`];
        },
      },
      { resource: X.kubernetesParameters, map: (o) => [`@params:${o.metadata.name ?? ''}`] },
    ],
  },
  concurrency: 4,
  rbac: [
    { apiGroups: ['execution.ayatori.ddupan.top'], resources: ['jobs', 'jobclasses'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: ['execution.ayatori.ddupan.top'], resources: ['jobs/status'], verbs: ['get', 'update', 'patch'] },
    {
      apiGroups: ['execution.ayatori.ddupan.top'],
      resources: ['kubernetesexecutionparameters'],
      verbs: ['get', 'list', 'watch', 'patch'],
    },
    { apiGroups: ['batch'], resources: ['jobs'], verbs: ['get', 'list', 'watch', 'create', 'patch'] },
    { apiGroups: [''], resources: ['serviceaccounts'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: [''], resources: ['events'], verbs: ['create'] },
  ],
  handler: handle,
};
export default fn;
