/**
 * Pure rendering of an accepted Job into a native batch/v1 Job in the same namespace: the
 * parameters' ServiceAccount (never the default one), RuntimeClass, node selector,
 * tolerations, Pod security context and image pull policy; the effective resources from
 * status (never the spec or the class as they are now); the Job's env with native
 * Secret/ConfigMap optional semantics; an owner reference to the Job. One attempt
 * (backoffLimit 0): retries are not part of this API.
 */
import type { KubeObject } from '../../lib/kube/types.ts';
import {
  API_VERSION,
  JOB_NAME_LABEL,
  JOB_NAMESPACE_LABEL,
  JOB_UID_LABEL,
  type Job,
  type KubernetesParameters,
} from '../../lib/jobclass/api.ts';

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** Deterministic batch Job name: the Job name (trimmed) plus a UID prefix, at most 63 characters. */
export function batchJobName(job: Job): string {
  const uid = (job.metadata.uid ?? '').replace(/-/g, '').slice(0, 8);
  const base = (job.metadata.name ?? 'job').slice(0, 54).replace(/[^a-z0-9]+$/, '');
  return `${base}-${uid}`;
}

export function jobLabels(job: Job): Record<string, string> {
  const name = job.metadata.name ?? '';
  return {
    [JOB_UID_LABEL]: job.metadata.uid ?? '',
    [JOB_NAMESPACE_LABEL]: job.metadata.namespace ?? '',
    ...(name.length <= 63 && LABEL_VALUE.test(name) ? { [JOB_NAME_LABEL]: name } : {}),
  };
}

function container(job: Job, params: KubernetesParameters): Record<string, unknown> {
  const eff = job.status?.effectiveResources ?? {};
  return {
    name: 'job',
    image: job.spec.image,
    ...(job.spec.command?.length ? { command: job.spec.command } : {}),
    ...(job.spec.args?.length ? { args: job.spec.args } : {}),
    ...(job.spec.env?.length ? { env: job.spec.env } : {}),
    resources: { ...(eff.requests ? { requests: eff.requests } : {}), ...(eff.limits ? { limits: eff.limits } : {}) },
    ...(params.spec.imagePullPolicy ? { imagePullPolicy: params.spec.imagePullPolicy } : {}),
  };
}

export function renderBatchJob(job: Job, params: KubernetesParameters): KubeObject {
  const p = params.spec;
  const labels = jobLabels(job);
  return {
    metadata: {
      name: batchJobName(job),
      namespace: job.metadata.namespace,
      labels,
      ownerReferences: [
        {
          apiVersion: API_VERSION,
          kind: 'Job',
          name: job.metadata.name ?? '',
          uid: job.metadata.uid ?? '',
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      backoffLimit: 0,
      completions: 1,
      parallelism: 1,
      ...(job.spec.activeDeadlineSeconds ? { activeDeadlineSeconds: job.spec.activeDeadlineSeconds } : {}),
      template: {
        metadata: { labels },
        spec: {
          restartPolicy: 'Never',
          serviceAccountName: p.serviceAccountName,
          enableServiceLinks: false,
          ...(p.runtimeClassName ? { runtimeClassName: p.runtimeClassName } : {}),
          ...(p.scheduling?.nodeSelector ? { nodeSelector: p.scheduling.nodeSelector } : {}),
          ...(p.scheduling?.tolerations?.length ? { tolerations: p.scheduling.tolerations } : {}),
          ...(p.podSecurityContext ? { securityContext: p.podSecurityContext } : {}),
          ...(job.spec.imagePullSecret ? { imagePullSecrets: [{ name: job.spec.imagePullSecret.name }] } : {}),
          containers: [container(job, params)],
        },
      },
    },
  };
}
