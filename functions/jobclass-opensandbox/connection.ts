/**
 * How to reach the backend for a Job: the parameters object the Job was resolved with (same
 * UID, never a same-name replacement), the backend (endpoint + API key Secret reference) and
 * the API key read from that Secret. The key only travels to the client; it never reaches
 * status, Events or logs.
 *
 * The persisted execution reference wins (seed 001, "参数更新不得使 adapter 为现存 Job 创建新的逻辑
 * 执行"): once a Job may have a sandbox (one is recorded, or a create intent is Pending) every
 * observe, create retry, cancel and delete goes to the backend recorded in status.execution,
 * whatever the parameters' endpoint says now. Only a Job without any possible execution uses
 * the parameters' current backend. On the recorded endpoint the current Secret reference is used
 * (rotation keeps working); on another one, the Secret reference recorded with it, so a key is
 * never sent to a backend it was not configured for.
 */
import { R } from '../../lib/fn/resources.ts';
import type { State } from '../../lib/fn/types.ts';
import { checkEndpoint, type EndpointPolicy } from '../../lib/opensandbox/endpoint.ts';
import { X, dataOf, type Job, type OpenSandboxParameters, type SecretKeyRef } from '../../lib/jobclass/api.ts';
import { frozenParametersProblem, type Problem } from '../../lib/jobclass/resolve.ts';

export interface Backend {
  endpoint: string;
  apiKeySecretRef: SecretKeyRef;
}

export interface Connection extends Backend {
  apiKey: string;
  params: OpenSandboxParameters;
  secretResourceVersion: string;
}

/** A sandbox may exist for the Job: one is recorded, or a create may still land. */
export const mayHaveExecution = (job: Job): boolean =>
  !!job.status?.execution?.sandboxID || job.status?.execution?.createIntent?.outcome === 'Pending';

/** The parameters' current backend. */
export const currentBackend = (params: OpenSandboxParameters): Backend => ({
  endpoint: params.spec.endpoint,
  apiKeySecretRef: params.spec.apiKeySecretRef,
});

/** Two spellings of one endpoint (case of scheme/host, default port, trailing slash) are equal. */
export function sameEndpoint(a: string, b: string): boolean {
  const norm = (s: string): string => {
    try {
      return new URL(s).href.replace(/\/+$/, '');
    } catch {
      return s;
    }
  };
  return norm(a) === norm(b);
}

/** The backend a Job's calls go to: the recorded one while a sandbox may exist, else the current one. */
export function backendFor(job: Job, params: OpenSandboxParameters): Backend | { problem: Problem } {
  const exec = job.status?.execution;
  if (!exec?.endpoint || !mayHaveExecution(job)) return currentBackend(params);
  if (sameEndpoint(exec.endpoint, params.spec.endpoint))
    return { endpoint: exec.endpoint, apiKeySecretRef: params.spec.apiKeySecretRef };
  if (!exec.apiKeySecretRef)
    return {
      problem: {
        reason: 'ApiKeySecretNotFound',
        message: `the execution is on ${exec.endpoint} (the parameters now name ${params.spec.endpoint}) and no API key Secret was recorded for it`,
      },
    };
  return { endpoint: exec.endpoint, apiKeySecretRef: exec.apiKeySecretRef };
}

export function connectionOf(
  params: OpenSandboxParameters,
  state: State,
  policy: EndpointPolicy,
  backend: Backend = currentBackend(params),
): Connection | { problem: Problem } {
  const check = checkEndpoint(backend.endpoint, policy);
  if (!check.ok)
    return { problem: { reason: check.reason, message: `${params.metadata.name ?? ''}: ${check.message}` } };
  const ref = backend.apiKeySecretRef;
  const secret = state.get(R.secrets, ref.namespace, ref.name);
  if (!secret)
    return {
      problem: { reason: 'ApiKeySecretNotFound', message: `Secret ${ref.namespace}/${ref.name} does not exist` },
    };
  const raw = dataOf(secret)[ref.key];
  const apiKey = raw ? Buffer.from(raw, 'base64').toString('utf8').trim() : '';
  if (!apiKey)
    return {
      problem: {
        reason: 'ApiKeyMissing',
        message: `Secret ${ref.namespace}/${ref.name} has no non-empty key ${ref.key}`,
      },
    };
  return { ...backend, apiKey, params, secretResourceVersion: secret.metadata.resourceVersion ?? '' };
}

export function connectionFor(job: Job, state: State, policy: EndpointPolicy): Connection | { problem: Problem } {
  const frozen = job.status!.resolvedJobClass!;
  const params = state.get(X.openSandboxParameters, undefined, frozen.parametersRef.name) as
    OpenSandboxParameters | undefined;
  const pp = frozenParametersProblem(frozen, params);
  if (pp) return { problem: pp };
  const backend = backendFor(job, params!);
  if ('problem' in backend) return backend;
  return connectionOf(params!, state, policy, backend);
}
