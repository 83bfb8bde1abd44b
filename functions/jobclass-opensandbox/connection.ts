/**
 * How to reach the backend for a Job: the parameters object the Job was resolved with (same
 * UID, never a same-name replacement), its endpoint under the controller's endpoint policy, and
 * the API key from the referenced Secret. The key only travels to the client; it never reaches
 * status, Events or logs.
 */
import { R } from '../../lib/fn/resources.ts';
import type { State } from '../../lib/fn/types.ts';
import { checkEndpoint, type EndpointPolicy } from '../../lib/opensandbox/endpoint.ts';
import { X, dataOf, type Job, type OpenSandboxParameters } from '../../lib/jobclass/api.ts';
import { frozenParametersProblem, type Problem } from '../../lib/jobclass/resolve.ts';

export interface Connection {
  endpoint: string;
  apiKey: string;
  params: OpenSandboxParameters;
  secretResourceVersion: string;
}

export function connectionOf(
  params: OpenSandboxParameters,
  state: State,
  policy: EndpointPolicy,
): Connection | { problem: Problem } {
  const check = checkEndpoint(params.spec.endpoint, policy);
  if (!check.ok)
    return { problem: { reason: check.reason, message: `${params.metadata.name ?? ''}: ${check.message}` } };
  const ref = params.spec.apiKeySecretRef;
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
  return {
    endpoint: params.spec.endpoint,
    apiKey,
    params,
    secretResourceVersion: secret.metadata.resourceVersion ?? '',
  };
}

export function connectionFor(job: Job, state: State, policy: EndpointPolicy): Connection | { problem: Problem } {
  const frozen = job.status!.resolvedJobClass!;
  const params = state.get(X.openSandboxParameters, undefined, frozen.parametersRef.name) as
    OpenSandboxParameters | undefined;
  const pp = frozenParametersProblem(frozen, params);
  if (pp) return { problem: pp };
  return connectionOf(params!, state, policy);
}
