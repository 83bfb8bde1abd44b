/**
 * Pure admission review of a new Job: rejects at create time what the JobClass design lets us
 * detect early (an unknown or disallowed class, resources outside the class policy, Secret env
 * or image auth the parameters do not allow, resources an adapter cannot represent). What only
 * becomes known later (no or several global defaults, a class not yet accepted, missing
 * Secrets) is admitted and reported through the Job's Accepted condition instead.
 */
import type { AdmissionResult } from '../../lib/fn/types.ts';
import type { Job, JobClass, Namespace, Parameters } from '../../lib/jobclass/api.ts';
import { controllerJobProblem, isSupportedController } from '../../lib/jobclass/controllers.ts';
import { namespaceAllowed, resolveClass, type Resolution } from '../../lib/jobclass/resolve.ts';
import { policyProblem, resolveResources } from '../../lib/jobclass/resources.ts';

export interface ReviewInput {
  job: Job;
  namespace: Namespace | undefined;
  classes: JobClass[];
  params: Parameters | undefined;
}

const deny = (code: number, reason: string, message: string): AdmissionResult => ({
  allowed: false,
  code,
  reason,
  message,
});
const warn = (message: string): AdmissionResult => ({ allowed: true, warnings: [message] });

function unresolved(r: Exclude<Resolution, { kind: 'resolved' }>): AdmissionResult {
  switch (r.kind) {
    case 'notFound':
      return deny(
        422,
        'Invalid',
        r.via === 'explicit'
          ? `spec.jobClassName: Not found: JobClass ${JSON.stringify(r.name)} does not exist`
          : `spec.jobClassName: Required value: the namespace default JobClass ${JSON.stringify(r.name)} does not exist; set spec.jobClassName`,
      );
    case 'none':
      return warn(
        'no JobClass applies (no spec.jobClassName, namespace default or global default): the Job stays Accepted=False/NoDefaultJobClass until one exists',
      );
    case 'ambiguous':
      return warn(
        `several global default JobClasses (${r.names.join(', ')}): the Job stays Accepted=False/AmbiguousDefaultJobClass; set spec.jobClassName`,
      );
  }
}

export function review(input: ReviewInput): AdmissionResult {
  const { job, namespace } = input;
  const r = resolveClass(job.spec.jobClassName, namespace, input.classes);
  if (r.kind !== 'resolved') return unresolved(r);
  const cls = r.cls;
  const name = cls.metadata.name ?? '';
  if (cls.metadata.deletionTimestamp)
    return deny(422, 'Invalid', `spec.jobClassName: Invalid value: JobClass ${JSON.stringify(name)} is being deleted`);
  if (!namespaceAllowed(cls, namespace))
    return deny(
      403,
      'Forbidden',
      `JobClass ${JSON.stringify(name)} is not allowed in namespace ${job.metadata.namespace ?? ''} (spec.allowedNamespaces)`,
    );
  if (!isSupportedController(cls.spec.controllerName))
    return warn(`JobClass ${name} names controller ${cls.spec.controllerName}, which this installation does not run`);
  if (policyProblem(cls.spec.resources))
    return warn(`JobClass ${name} has an invalid resource policy; the Job waits until the class is fixed`);
  const res = resolveResources(job.spec.resources, cls.spec.resources);
  if (!res.ok) return deny(422, 'Invalid', `${res.message} (JobClass ${name})`);
  const p = controllerJobProblem(cls.spec.controllerName, job, input.params, res.effective);
  if (p) return deny(422, 'Invalid', `${p.message} (JobClass ${name}, ${p.reason})`);
  return { allowed: true };
}
