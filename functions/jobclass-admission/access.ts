/**
 * A Job may name only Secrets and ConfigMaps its creator may read: the adapters read them with
 * the platform's identity (the OpenSandbox adapter sends their values to the sandbox, the
 * Kubernetes adapter hands them to the kubelet), so without this check creating a Job would be
 * a way to read any Secret of the namespace. One SubjectAccessReview (`get` on the named object)
 * per distinct reference, for the requesting user; any error denies (fail closed).
 */
import { userMay } from '../../lib/fn/access.ts';
import type { AdmissionContext, AdmissionRequest, AdmissionResult } from '../../lib/fn/types.ts';
import type { Job } from '../../lib/jobclass/api.ts';

export interface Reference {
  resource: 'secrets' | 'configmaps';
  name: string;
  /** The first field that names it, for the error message. */
  field: string;
}

/** The distinct Secrets and ConfigMaps a Job names (env value sources and the image pull Secret). */
export function jobReferences(job: Job): Reference[] {
  const refs: Reference[] = [];
  const add = (resource: Reference['resource'], name: string, field: string): void => {
    if (!refs.some((r) => r.resource === resource && r.name === name)) refs.push({ resource, name, field });
  };
  (job.spec.env ?? []).forEach((e, i) => {
    const s = e.valueFrom?.secretKeyRef;
    const c = e.valueFrom?.configMapKeyRef;
    if (s) add('secrets', s.name, `spec.env[${i}].valueFrom.secretKeyRef.name`);
    if (c) add('configmaps', c.name, `spec.env[${i}].valueFrom.configMapKeyRef.name`);
  });
  if (job.spec.imagePullSecret?.name) add('secrets', job.spec.imagePullSecret.name, 'spec.imagePullSecret.name');
  return refs;
}

const KIND = { secrets: 'Secret', configmaps: 'ConfigMap' } as const;

/** Undefined when the creator may read every reference; otherwise the denial. */
export async function referenceAccess(
  req: AdmissionRequest,
  job: Job,
  ctx: AdmissionContext,
): Promise<AdmissionResult | undefined> {
  const ns = job.metadata.namespace ?? '';
  const refs = jobReferences(job);
  let verdicts: boolean[];
  try {
    verdicts = await Promise.all(
      refs.map((r) =>
        userMay(ctx, req.userInfo, { namespace: ns, verb: 'get', group: '', resource: r.resource, name: r.name }),
      ),
    );
  } catch (err) {
    return {
      allowed: false,
      code: 503,
      reason: 'ServiceUnavailable',
      message: `could not verify that ${req.userInfo.username} may read the Secrets and ConfigMaps the Job names (${err instanceof Error ? err.message : String(err)}); the Job is rejected, retry`,
    };
  }
  const denied = refs.find((_, i) => !verdicts[i]);
  if (!denied) return undefined;
  return {
    allowed: false,
    code: 403,
    reason: 'Forbidden',
    message: `${denied.field}: ${req.userInfo.username} may not get ${KIND[denied.resource]} "${denied.name}" in namespace ${ns}; a Job may name only Secrets and ConfigMaps its creator may read`,
  };
}
