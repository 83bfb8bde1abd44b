/**
 * Controller-level configuration of the JobClass functions (environment of the extension API
 * server), read on use so tests can set it. Nothing here is a user or class setting.
 *
 * - KRT_OPENSANDBOX_INSECURE_HOSTS: comma-separated host names whose OpenSandbox endpoints may
 *   use plain http:// (the explicit local-development allowance; empty in production).
 * - KRT_OPENSANDBOX_CA_FILE: PEM bundle trusted for https:// OpenSandbox endpoints in addition
 *   to nothing else (replaces the default trust store for those calls).
 */
import { policyFromEnv, type EndpointPolicy } from '../opensandbox/endpoint.ts';

export function endpointPolicy(env: NodeJS.ProcessEnv = process.env): EndpointPolicy {
  return policyFromEnv(env.KRT_OPENSANDBOX_INSECURE_HOSTS);
}
