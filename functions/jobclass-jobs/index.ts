/**
 * Job acceptance: resolves the JobClass (explicit, namespace default, single global default),
 * freezes it with UIDs in status.resolvedJobClass, checks the class, namespace, resource policy,
 * Secret/ConfigMap references and controller-specific allowances, writes Accepted and the
 * effective resources (with an Event per transition), and deletes finished Jobs after
 * ttlSecondsAfterFinished. Accepted Jobs belong to their class's adapter function.
 * Dependency changes wake the affected pending Jobs through @class:/@ns: keys.
 */
import { R } from '../../lib/fn/resources.ts';
import type { FunctionDef, Operation, ReconcileInput } from '../../lib/fn/types.ts';
import { X, type Job } from '../jobclass-core/api.ts';
import { pendingJobs, reconcileJob } from './core.ts';

export function handle({ key, object, state, now }: ReconcileInput): Operation[] {
  if (key.startsWith('@class:')) return pendingJobs(state).flatMap((j) => reconcileJob(j, state, now));
  if (key.startsWith('@ns:')) return pendingJobs(state, key.slice(4)).flatMap((j) => reconcileJob(j, state, now));
  return reconcileJob(object as Job | undefined, state, now);
}

const nsKey = (o: { metadata: { namespace?: string } }): string[] => (o.metadata.namespace ? [`@ns:${o.metadata.namespace}`] : []);

const fn: FunctionDef = {
  name: 'jobclass-jobs',
  description: 'Resolves and freezes the JobClass of each Job, decides Accepted with effective resources, and applies ttlSecondsAfterFinished.',
  trigger: {
    type: 'watch', resource: X.jobs,
    also: [
      { resource: X.jobClasses, map: (o) => [`@class:${o.metadata.name ?? ''}`] },
      { resource: X.kubernetesParameters, map: () => ['@class:*'] },
      { resource: X.openSandboxParameters, map: () => ['@class:*'] },
      { resource: X.namespaces, map: (o) => [`@ns:${o.metadata.name ?? ''}`] },
      { resource: R.secrets, map: nsKey },
      { resource: R.configMaps, map: nsKey },
    ],
  },
  concurrency: 4,
  rbac: [
    { apiGroups: ['execution.ayatori.ddupan.top'], resources: ['jobs'], verbs: ['get', 'list', 'watch', 'delete'] },
    { apiGroups: ['execution.ayatori.ddupan.top'], resources: ['jobs/status'], verbs: ['get', 'update', 'patch'] },
    { apiGroups: ['execution.ayatori.ddupan.top'], resources: ['jobclasses', 'kubernetesexecutionparameters', 'opensandboxexecutionparameters'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: [''], resources: ['namespaces', 'secrets', 'configmaps'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: [''], resources: ['events'], verbs: ['create'] },
  ],
  handler: handle,
};
export default fn;
