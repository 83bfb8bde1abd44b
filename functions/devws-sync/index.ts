/**
 * devws-sync (ADR 0020): the repository sync of developer-workspace Projects. A Project without a
 * snapshot gets one sync: recorded as running in its status, then the Git Server (the ConfigMap
 * kruntimes-devws's gitServerUrl and gitServerCA) is asked over HTTPS, with the token of the
 * Secret kruntimes-devws-git-sync, to fetch the binding branch into the Project's repository; the
 * snapshot it made is recorded in status.snapshot. Hosting: like jobclass-opensandbox, this
 * handler performs one HTTP call per invocation at most; the decisions are pure (core.ts).
 */
import https from 'node:https';
import { D, GROUP, type Project } from '../../lib/devws/api.ts';
import type { SyncRequest, SyncResult } from '../../lib/devws/sync.ts';
import { R } from '../../lib/fn/resources.ts';
import type { FunctionDef, Operation as FnOp, ReconcileInput, State } from '../../lib/fn/types.ts';
import { afterSync, decideSync, removalOf, SYNC_RETRY_MS, type SyncOutcome } from './core.ts';

const SYS = process.env.POD_NAMESPACE ?? 'kruntimes-system';
export const CONFIG_MAP = 'kruntimes-devws';
export const SYNC_SECRET = 'kruntimes-devws-git-sync';
const CALL_TIMEOUT_MS = 110_000;

export interface SyncEndpoint {
  url: string;
  ca?: string;
  token: string;
}

/** The Git Server's sync endpoint, when the ConfigMap names a Git Server and the token Secret exists. */
export function syncEndpoint(state: State): SyncEndpoint | undefined {
  const cm = state.get(D.configMaps, SYS, CONFIG_MAP) as { data?: Record<string, string> } | undefined;
  const secret = state.get(R.secrets, SYS, SYNC_SECRET) as { data?: Record<string, string> } | undefined;
  const base = cm?.data?.gitServerUrl;
  const token = secret?.data?.token ? Buffer.from(secret.data.token, 'base64').toString('utf8').trim() : '';
  if (!base || !token) return undefined;
  return {
    url: `${base.replace(/\/+$/, '')}/-/sync`,
    token,
    ...(cm.data?.gitServerCA ? { ca: cm.data.gitServerCA } : {}),
  };
}

/** POST to the Git Server: the status code and body, or why it did not answer. */
function post(
  e: SyncEndpoint,
  url: string,
  body: unknown,
): Promise<{ code: number; body: string } | { error: string }> {
  return new Promise((resolve) => {
    const req = https.request(
      url,
      {
        method: 'POST',
        headers: { authorization: `Bearer ${e.token}`, 'content-type': 'application/json' },
        ...(e.ca ? { ca: e.ca } : {}),
        timeout: CALL_TIMEOUT_MS,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ code: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('the Git Server did not answer in time')));
    req.on('error', (err) => resolve({ error: err.message }));
    req.end(JSON.stringify(body));
  });
}

/** POST /-/remove of a deleted Project's repository: done (or refused for good), else asked again after 5 s. */
export async function removeRepository(
  e: SyncEndpoint,
  target: { namespace: string; project: string },
): Promise<FnOp[]> {
  const r = await post(e, e.url.replace(/\/-\/sync$/, '/-/remove'), target);
  const again = 'error' in r || (r.code !== 200 && outcomeOf(r.code, r.body).kind === 'unanswered');
  return again ? [{ op: 'requeue', afterMs: SYNC_RETRY_MS }] : [];
}

/** POST /-/sync: 200 synced; 4xx failed (the Git Server refused or the fetch failed); anything else unanswered. */
export async function callSync(e: SyncEndpoint, r: SyncRequest): Promise<SyncOutcome> {
  const res = await post(e, e.url, r);
  return 'error' in res ? { kind: 'unanswered', message: res.error } : outcomeOf(res.code, res.body);
}

export function outcomeOf(code: number, body: string): SyncOutcome {
  let doc: { ref?: string; commit?: string; message?: string; reason?: string } = {};
  try {
    doc = JSON.parse(body) as typeof doc;
  } catch {
    // not JSON: judged by the status code alone
  }
  if (code === 200 && doc.ref && doc.commit) return { kind: 'synced', result: doc as SyncResult };
  // The Git Server's message may already start with its reason ("ssh_unavailable: …"): not twice.
  const said =
    doc.reason && doc.message?.startsWith(`${doc.reason}:`) ? doc.message : `${doc.reason ?? ''} ${doc.message ?? ''}`;
  const message = `Git Server answered ${code}: ${said.trim()}`.trim();
  if (code >= 400 && code < 500 && code !== 401 && code !== 408 && code !== 429) return { kind: 'failed', message };
  return { kind: 'unanswered', message };
}

export async function handle({ key, object, state, now }: ReconcileInput): Promise<FnOp[]> {
  const p = object as Project | undefined;
  const endpoint = syncEndpoint(state);
  const removal = removalOf(key, p);
  if (removal) return endpoint ? removeRepository(endpoint, removal) : [];
  if (!p) return [];
  const d = decideSync(p, !!endpoint, now);
  if (d.kind === 'ops' || !endpoint) return d.kind === 'ops' ? d.ops : [];
  return afterSync(p, await callSync(endpoint, d.request), now);
}

const fn: FunctionDef = {
  name: 'devws-sync',
  description:
    "Syncs a developer-workspace Project's repository binding: asks the Git Server to fetch the binding branch and records the snapshot in the Project's status; removes a deleted Project's repository.",
  trigger: {
    type: 'watch',
    resource: D.projects,
    fetch: {
      resources: [D.configMaps, R.secrets],
      refs: () => [
        { resource: D.configMaps, namespace: SYS, name: CONFIG_MAP },
        { resource: R.secrets, namespace: SYS, name: SYNC_SECRET },
      ],
    },
  },
  concurrency: 2,
  rbac: [
    { apiGroups: [GROUP], resources: ['projects'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: [GROUP], resources: ['projects/status'], verbs: ['get', 'update', 'patch'] },
    { apiGroups: [''], resources: ['configmaps'], verbs: ['get'], resourceNames: [CONFIG_MAP], scope: 'namespace' },
    { apiGroups: [''], resources: ['secrets'], verbs: ['get'], resourceNames: [SYNC_SECRET], scope: 'namespace' },
    { apiGroups: [''], resources: ['events'], verbs: ['create'] },
  ],
  handler: handle,
};
export default fn;
