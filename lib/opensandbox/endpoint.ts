/**
 * Endpoint policy for OpenSandboxExecutionParameters.spec.endpoint: an absolute https:// URL
 * without credentials, query or fragment. Plain http:// is accepted only for hosts the
 * controller was explicitly started to allow (local development, e.g. a loopback test server);
 * that allowance is controller configuration, never a field of the parameters object.
 */

export interface EndpointPolicy {
  /** Host names (without port) that may be used over plain http://. Empty in production. */
  insecureHosts: readonly string[];
}

export const STRICT: EndpointPolicy = { insecureHosts: [] };

export type EndpointCheck =
  { ok: true; url: URL } | { ok: false; reason: 'InvalidEndpoint' | 'InsecureEndpoint'; message: string };

function bad(message: string): EndpointCheck {
  return { ok: false, reason: 'InvalidEndpoint', message };
}

export function checkEndpoint(raw: string, policy: EndpointPolicy = STRICT): EndpointCheck {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return bad('spec.endpoint must be an absolute URL');
  }
  if (url.username || url.password)
    return bad('spec.endpoint must not contain credentials; reference the API key through spec.apiKeySecretRef');
  if (url.search || url.hash) return bad('spec.endpoint must not contain a query or fragment');
  if (url.protocol === 'https:') return { ok: true, url };
  if (url.protocol !== 'http:') return bad(`spec.endpoint must use https:// (got ${url.protocol})`);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (policy.insecureHosts.includes(host)) return { ok: true, url };
  return {
    ok: false,
    reason: 'InsecureEndpoint',
    message: `spec.endpoint must use https://; plain http:// is only allowed for hosts the controller explicitly allows for local development (${host} is not one)`,
  };
}

/** Parses a comma-separated allowance (e.g. KRT_OPENSANDBOX_INSECURE_HOSTS="127.0.0.1,localhost"). */
export function policyFromEnv(value: string | undefined): EndpointPolicy {
  return {
    insecureHosts: (value ?? '')
      .split(',')
      .map((h) => h.trim())
      .filter(Boolean),
  };
}

/** The URL of an API path under the endpoint (which may carry a path prefix). */
export function apiUrl(endpoint: URL, path: string, query?: URLSearchParams): string {
  const base = endpoint.href.replace(/\/+$/, '');
  const q = query && [...query.keys()].length ? `?${query.toString()}` : '';
  return `${base}${path}${q}`;
}
