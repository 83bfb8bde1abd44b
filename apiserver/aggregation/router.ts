/**
 * The aggregated API surface of the extension server: discovery for
 * logs.kruntimes.io, artifacts.kruntimes.io and sessions.kruntimes.io, and request-header
 * authentication in front of everything under /apis (WebSocket session upgrades authenticate
 * the same way in apiserver/sessions). Admission webhook paths are not under /apis and are not affected.
 */
import express, { type Router } from 'express';
import type { Logger } from 'pino';
import type { KubeClient } from '../../lib/kube/client.ts';
import type { IncomingMessage } from 'node:http';
import { artifactsRouter, ARTIFACTS_GROUP } from '../artifacts/handler.ts';
import { logsRouter, LOGS_GROUP, type RunLookup } from '../logs/handler.ts';
import { SESSIONS_GROUP } from '../sessions/handler.ts';
import type { SessionTokens } from '../sessions/link.ts';
import {
  authenticate,
  loadRequestHeaderConfig,
  RequestHeaderSource,
  type RequestHeaderConfig,
  type UserInfo,
} from './requestheader.ts';
import { status } from './status.ts';

/** The Run subresources each aggregated group serves, authorised per Run name by RBAC. */
const SUBRESOURCES: Record<string, { name: string; kind: string; verbs: string[] }> = {
  [LOGS_GROUP]: { name: 'runs/log', kind: 'RunLog', verbs: ['get'] },
  [ARTIFACTS_GROUP]: { name: 'runs/artifacts', kind: 'RunArtifact', verbs: ['get'] },
  // A session needs get (the API server's check of the GET) and create (the backend's, as for pods/exec).
  [SESSIONS_GROUP]: { name: 'runs/session', kind: 'RunSession', verbs: ['create', 'get'] },
};
const GROUPS = Object.keys(SUBRESOURCES);

function groupDoc(g: string): object {
  const v = { groupVersion: `${g}/v1alpha1`, version: 'v1alpha1' };
  return { kind: 'APIGroup', apiVersion: 'v1', name: g, versions: [v], preferredVersion: v };
}

export function resourceList(group: string): object {
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: `${group}/v1alpha1`,
    resources: [
      { name: 'runs', singularName: 'run', namespaced: true, kind: 'Run', verbs: [] },
      ...(SUBRESOURCES[group]
        ? [
            {
              name: SUBRESOURCES[group].name,
              singularName: '',
              namespaced: true,
              kind: SUBRESOURCES[group].kind,
              verbs: SUBRESOURCES[group].verbs,
            },
          ]
        : []),
    ],
  };
}

/** How often the requestheader configuration (client CA, allowed names, headers) is reloaded. */
export const REQUESTHEADER_REFRESH_MS = 60_000;

/**
 * `client` serves the APIs; `authClient` (default: client) reads the aggregator's requestheader
 * configuration; `cachedRun` finds a Run in the extension server's informer cache (Run logs).
 */
export async function aggregationRouter(
  client: KubeClient,
  log: Logger,
  tokens?: SessionTokens,
  authClient: KubeClient = client,
  cachedRun?: RunLookup,
): Promise<{
  router: Router;
  source: RequestHeaderSource;
  authenticate: (req: IncomingMessage) => UserInfo | string;
}> {
  const source = await RequestHeaderSource.start(() => loadRequestHeaderConfig(authClient));
  setInterval(() => {
    source.refresh().catch((err: unknown) => log.warn({ err }, 'requestheader config refresh failed'));
  }, REQUESTHEADER_REFRESH_MS).unref();
  const cfg = (): RequestHeaderConfig => source.current();
  const r = express.Router();
  r.use('/apis', (req, res, next) => {
    const who = authenticate(req, cfg());
    if (typeof who === 'string') {
      status(res, 401, 'Unauthorized', `this API is served through the Kubernetes API server only: ${who}`);
      return;
    }
    (req as express.Request & { user?: unknown }).user = who;
    next();
  });
  r.get('/apis', (_req, res) => {
    res.json({ kind: 'APIGroupList', apiVersion: 'v1', groups: GROUPS.map((g) => groupDoc(g)) });
  });
  for (const g of GROUPS) {
    r.get(`/apis/${g}`, (_req, res) => {
      res.json(groupDoc(g));
    });
    r.get(`/apis/${g}/v1alpha1`, (_req, res) => {
      res.json(resourceList(g));
    });
  }
  r.use(logsRouter(client, log, cachedRun));
  r.use(artifactsRouter(client, log, tokens));
  return { router: r, source, authenticate: (req) => authenticate(req, cfg()) };
}
