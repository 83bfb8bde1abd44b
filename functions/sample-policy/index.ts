/**
 * Sample admission function: a ConfigMap labelled kruntimes.io/sample=policy must name its
 * owner in data.owner. Shows the admission contract: the request in, allowed + message out.
 */
import type { AdmissionRequest, AdmissionResult, FunctionDef } from '../../lib/fn/types.ts';

export function checkOwner(req: AdmissionRequest): AdmissionResult {
  const data = (req.object as { data?: Record<string, string> } | undefined)?.data ?? {};
  if (req.object?.metadata.labels?.['kruntimes.io/sample'] !== 'policy') return { allowed: true };
  if (data.owner?.trim()) return { allowed: true };
  return {
    allowed: false,
    code: 422,
    reason: 'Invalid',
    message:
      'data.owner: Required value: ConfigMaps labelled kruntimes.io/sample=policy must name their owner in data.owner',
  };
}

const fn: FunctionDef = {
  name: 'sample-policy',
  description: 'Sample: ConfigMaps labelled kruntimes.io/sample=policy must set data.owner.',
  trigger: {
    type: 'admission',
    webhook: 'validating',
    timeoutSeconds: 5,
    failurePolicy: 'Fail',
    objectSelector: { matchLabels: { 'kruntimes.io/sample': 'policy' } },
    rules: [
      {
        apiGroups: [''],
        apiVersions: ['v1'],
        resources: ['configmaps'],
        operations: ['CREATE', 'UPDATE'],
        scope: 'Namespaced',
      },
    ],
  },
  rbac: [],
  handler: checkOwner,
};
export default fn;
