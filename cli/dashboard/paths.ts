/**
 * What the dashboard forwards to the API server: an allow-list of read paths (the kruntimes
 * resources, Runtime Pods, Events, namespaces) and of query parameters. The server is not an
 * open proxy; anything else is refused before a request leaves it.
 */

const DNS = '[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?';
const KRT_RESOURCES = 'runs|runtimes|workflows|workflowruns|persistentworkspaces|actions';
/** Developer workspaces (dev.kruntimes.io): read, and start/stop through an Operation. */
const DEV_RESOURCES = 'projects|workspaces|operations';
const READ_PATHS = [
  new RegExp(`^/api/v1/namespaces$`),
  new RegExp(`^/api/v1/namespaces/${DNS}/(pods|events)$`),
  new RegExp(`^/apis/kruntimes\\.io/v1alpha1/namespaces/${DNS}/(${KRT_RESOURCES})(/${DNS})?$`),
  new RegExp(`^/apis/dev\\.kruntimes\\.io/v1alpha1/namespaces/${DNS}/(${DEV_RESOURCES})(/${DNS})?$`),
];
const QUERY_KEYS = new Set(['labelSelector', 'fieldSelector', 'limit']);

export class PathRefused extends Error {}

/** A read path and query the dashboard may forward; throws PathRefused otherwise. */
export function allowedRead(
  path: unknown,
  query: Record<string, unknown>,
): { path: string; query: Record<string, string> } {
  if (typeof path !== 'string' || !READ_PATHS.some((re) => re.test(path)))
    throw new PathRefused(`path ${JSON.stringify(path)} is not one the dashboard reads`);
  const q: Record<string, string> = {};
  for (const [k, v] of Object.entries(query)) {
    if (k === 'path') continue;
    if (!QUERY_KEYS.has(k) || typeof v !== 'string' || v.length > 1024)
      throw new PathRefused(`query parameter ${JSON.stringify(k)} is not one the dashboard forwards`);
    q[k] = v;
  }
  return { path, query: q };
}

/** A namespace or object name (DNS subdomain); throws PathRefused otherwise. */
export function checkName(kind: string, v: unknown): string {
  if (typeof v !== 'string' || !new RegExp(`^${DNS}$`).test(v))
    throw new PathRefused(`${kind} ${JSON.stringify(v)} is not a valid name`);
  return v;
}

export const KRT = '/apis/kruntimes.io/v1alpha1';
export const DEV = '/apis/dev.kruntimes.io/v1alpha1';
export const logsPath = (ns: string, run: string): string =>
  `/apis/logs.kruntimes.io/v1alpha1/namespaces/${ns}/runs/${run}/log`;
export const artifactsPath = (ns: string, run: string): string =>
  `/apis/artifacts.kruntimes.io/v1alpha1/namespaces/${ns}/runs/${run}/artifacts`;
