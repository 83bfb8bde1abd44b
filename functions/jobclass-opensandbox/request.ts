/**
 * Pure mapping of an accepted Job to an OpenSandbox CreateSandboxRequest and the preflight that
 * gathers what the request needs from the cluster (env values, registry credentials), honouring
 * the parameters' allowances. Every sandbox is tagged with the Job UID in its metadata so the
 * adapter can find it again by listing (creates are not idempotent upstream).
 */
import { R } from '../../lib/fn/resources.ts';
import type { State } from '../../lib/fn/types.ts';
import type { CreateSandboxRequest } from '../../lib/opensandbox/types.ts';
import {
  CLASS_UID_LABEL,
  JOB_NAME_LABEL,
  JOB_NAMESPACE_LABEL,
  JOB_UID_LABEL,
  type Job,
  type OpenSandboxParameters,
} from '../../lib/jobclass/api.ts';
import { imageAuthFrom, resolveEnv, usesSecretEnv } from '../../lib/jobclass/envrefs.ts';
import type { Problem } from '../../lib/jobclass/resolve.ts';

/** The OpenSandbox timeout floor (CreateSandboxRequest.timeout minimum). */
export const MIN_TIMEOUT_SECONDS = 60;

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** The metadata identifying the Job's sandboxes (the list filter is the UID entry alone). */
export function sandboxMetadata(job: Job): Record<string, string> {
  const name = job.metadata.name ?? '';
  const classUid = job.status?.resolvedJobClass?.uid;
  return {
    [JOB_UID_LABEL]: job.metadata.uid ?? '',
    [JOB_NAMESPACE_LABEL]: job.metadata.namespace ?? '',
    ...(name.length <= 63 && LABEL_VALUE.test(name) ? { [JOB_NAME_LABEL]: name } : {}),
    ...(classUid ? { [CLASS_UID_LABEL]: classUid } : {}),
  };
}

export interface Materials {
  env: Record<string, string>;
  auth?: { username: string; password: string };
}

/** Env values and registry credentials for the request, or why they cannot be sent. */
export function materials(
  job: Job,
  params: OpenSandboxParameters,
  state: State,
): { ok: true; m: Materials } | { ok: false; problem: Problem } {
  if (usesSecretEnv(job) && !params.spec.allowSecretEnv)
    return {
      ok: false,
      problem: {
        reason: 'SecretEnvNotAllowed',
        message: `spec.env uses secretKeyRef, but ${params.metadata.name ?? ''} does not set allowSecretEnv`,
      },
    };
  if (job.spec.imagePullSecret && !params.spec.allowImageAuth)
    return {
      ok: false,
      problem: {
        reason: 'ImageAuthNotAllowed',
        message: `spec.imagePullSecret is set, but ${params.metadata.name ?? ''} does not set allowImageAuth`,
      },
    };
  const env = resolveEnv(job, state);
  if (!env.ok) return { ok: false, problem: env.problem };
  const pull = job.spec.imagePullSecret?.name;
  if (!pull) return { ok: true, m: { env: env.env } };
  const secret = state.get(R.secrets, job.metadata.namespace, pull);
  if (!secret)
    return {
      ok: false,
      problem: {
        reason: 'ImagePullSecretNotFound',
        message: `Secret ${job.metadata.namespace ?? ''}/${pull} does not exist`,
      },
    };
  const auth = imageAuthFrom(secret, job.spec.image);
  return auth.ok
    ? { ok: true, m: { env: env.env, auth: { username: auth.username, password: auth.password } } }
    : { ok: false, problem: auth.problem };
}

/**
 * The create request. Limits become resourceLimits (AdmissionOnly: requests only count for
 * Ayatori admission; Native: acceptance already required requests == limits), never lowered.
 * activeDeadlineSeconds becomes the sandbox timeout (at least the API minimum of 60 s; the
 * adapter itself stops the sandbox at the exact deadline).
 */
export function buildCreateRequest(job: Job, params: OpenSandboxParameters, m: Materials): CreateSandboxRequest {
  const limits = job.status?.effectiveResources?.limits ?? {};
  const resourceLimits: Record<string, string> = {};
  if (limits.cpu) resourceLimits.cpu = limits.cpu;
  if (limits.memory) resourceLimits.memory = limits.memory;
  const deadline = job.spec.activeDeadlineSeconds;
  return {
    image: { uri: job.spec.image, ...(m.auth ? { auth: m.auth } : {}) },
    entrypoint: [...(job.spec.command ?? []), ...(job.spec.args ?? [])],
    ...(Object.keys(resourceLimits).length ? { resourceLimits } : {}),
    ...(Object.keys(m.env).length ? { env: m.env } : {}),
    ...(deadline ? { timeout: Math.max(MIN_TIMEOUT_SECONDS, deadline) } : {}),
    metadata: sandboxMetadata(job),
    ...(params.spec.poolRef ? { extensions: { poolRef: params.spec.poolRef } } : {}),
  };
}
