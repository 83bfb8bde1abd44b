/**
 * Validating admission for new execution.ayatori.ddupan.top Jobs (fail closed: a failed lookup
 * or a missed deadline denies). Reads the namespace, the JobClass(es) and the class's
 * parameters with the admission context, then applies the pure review in core.ts; an admitted
 * Job must also name only Secrets and ConfigMaps its creator may read (access.ts).
 */
import type { AdmissionContext, AdmissionRequest, AdmissionResult, FunctionDef } from '../../lib/fn/types.ts';
import { resourcePath } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import {
  NAMESPACE_DEFAULT_ANNOTATION,
  X,
  type Job,
  type JobClass,
  type Namespace,
  type Parameters,
} from '../../lib/jobclass/api.ts';
import { CONTROLLERS, parametersRefProblem } from '../../lib/jobclass/controllers.ts';
import { resolveClass } from '../../lib/jobclass/resolve.ts';
import { referenceAccess } from './access.ts';
import { review } from './core.ts';

interface ClassList extends KubeObject {
  items: JobClass[];
}

/** The classes the review needs: the named one, else the namespace default, else all (for the global default). */
async function classesFor(job: Job, ns: Namespace | undefined, ctx: AdmissionContext): Promise<JobClass[]> {
  const named = job.spec.jobClassName ?? ns?.metadata.annotations?.[NAMESPACE_DEFAULT_ANNOTATION];
  if (named) {
    const cls = await ctx.get<JobClass>(resourcePath(X.jobClasses, undefined, named));
    return cls ? [cls] : [];
  }
  return (await ctx.get<ClassList>(resourcePath(X.jobClasses)))?.items ?? [];
}

async function parametersFor(cls: JobClass | undefined, ctx: AdmissionContext): Promise<Parameters | undefined> {
  const info = cls ? CONTROLLERS[cls.spec.controllerName] : undefined;
  if (!cls || !info || parametersRefProblem(cls.spec.controllerName, cls.spec.parametersRef)) return undefined;
  return ctx.get<Parameters>(resourcePath(info.parameters, undefined, cls.spec.parametersRef.name));
}

export async function admitJob(req: AdmissionRequest, ctx: AdmissionContext): Promise<AdmissionResult> {
  if (req.operation !== 'CREATE' || !req.object) return { allowed: true };
  const job = {
    ...req.object,
    metadata: { ...req.object.metadata, namespace: req.object.metadata.namespace ?? req.namespace },
  } as Job;
  const namespace = await ctx.get<Namespace>(resourcePath(X.namespaces, undefined, job.metadata.namespace ?? ''));
  const classes = await classesFor(job, namespace, ctx);
  const r = resolveClass(job.spec.jobClassName, namespace, classes);
  const params = r.kind === 'resolved' ? await parametersFor(r.cls, ctx) : undefined;
  const verdict = review({ job, namespace, classes, params });
  if (!verdict.allowed) return verdict;
  return (await referenceAccess(req, job, ctx)) ?? verdict;
}

const fn: FunctionDef = {
  name: 'jobclass-admission',
  description:
    'Rejects new Jobs with an unknown or disallowed JobClass, resources outside the class policy, Secret env/image auth the class does not allow, or Secrets/ConfigMaps their creator may not read.',
  trigger: {
    type: 'admission',
    webhook: 'validating',
    timeoutSeconds: 5,
    failurePolicy: 'Fail',
    rules: [
      {
        apiGroups: ['execution.ayatori.ddupan.top'],
        apiVersions: ['v1alpha1'],
        resources: ['jobs'],
        operations: ['CREATE'],
        scope: 'Namespaced',
      },
    ],
  },
  rbac: [
    {
      apiGroups: ['execution.ayatori.ddupan.top'],
      resources: ['jobclasses', 'kubernetesexecutionparameters', 'opensandboxexecutionparameters'],
      verbs: ['get', 'list'],
    },
    { apiGroups: [''], resources: ['namespaces'], verbs: ['get'] },
    { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
  ],
  handler: admitJob,
};
export default fn;
