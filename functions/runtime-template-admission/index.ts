/**
 * Admission: a Runtime's Pod template may not reach into runtimed or hand runtimed's material
 * to Run code (lib/run/template-policy.ts): no container named runtimed, only TLS/HTTP GIT_*
 * variables for runtimed's git, no shared process namespace or host PID namespace, and the
 * artifact store's claim and credentials Secret only for runtimed. Pure: no API reads.
 */
import type { AdmissionRequest, AdmissionResult, FunctionDef } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { templateProblems, type TemplateInput } from '../../lib/run/template-policy.ts';

export function admitRuntime(req: AdmissionRequest): AdmissionResult {
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion -- tsc needs it (the lint type service sees the index signature)
  const rt = req.object as (KubeObject & { spec?: TemplateInput }) | undefined;
  if (!rt || (req.operation !== 'CREATE' && req.operation !== 'UPDATE')) return { allowed: true };
  const problems = templateProblems(rt.spec ?? {});
  if (!problems.length) return { allowed: true };
  return {
    allowed: false,
    code: 422,
    reason: 'Invalid',
    message: `Runtime ${rt.metadata.name ?? ''}: ${problems.join('; ')}`,
  };
}

const fn: FunctionDef = {
  name: 'runtime-template-admission',
  description:
    "Runtime Pod templates may not configure runtimed, pass it unsafe GIT_* variables, share its process namespace, or give Runs the artifact store's claim or credentials.",
  trigger: {
    type: 'admission',
    webhook: 'validating',
    timeoutSeconds: 5,
    failurePolicy: 'Fail',
    rules: [
      {
        apiGroups: ['kruntimes.io'],
        apiVersions: ['v1alpha1'],
        resources: ['runtimes'],
        operations: ['CREATE', 'UPDATE'],
        scope: 'Namespaced',
      },
    ],
  },
  rbac: [],
  handler: admitRuntime,
};
export default fn;
