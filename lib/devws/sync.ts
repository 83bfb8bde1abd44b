/**
 * The repository sync of a Project's binding (seed 002 "Git Server"): the sync function asks the
 * Git Server to fetch the binding branch of the external repository and records the snapshot it
 * made in the Project's status. This is the request both sides agree on, and its validation. The
 * Git Server fetches what the Project object says (ADR 0026), never what the request says: the
 * request names the Project, and any repository, branch or binding it also carries must match.
 */
import { DevwsError, type Project } from './api.ts';
import { GitAccessError } from './git-access.ts';
import { validateRefName, validateRepositoryUrl } from './validate.ts';

export interface SyncRequest {
  namespace: string;
  project: string;
  /** What the caller believes the binding is; the Git Server refuses a mismatch (sync_target_mismatch). */
  bindingId?: string;
  url?: string;
  branch?: string;
}

/** What the Git Server fetches: read from the Project object. */
export interface SyncTarget {
  namespace: string;
  project: string;
  bindingId: string;
  /** The external repository: https, or ssh (ssh:// or scp-like) with an ssh-auth credentialRef (ADR 0035). */
  url: string;
  branch: string;
  /** The Secret (same namespace) holding the repository's credential, when the Project names one. */
  credentialRef?: string;
}

export interface SyncResult {
  ref: string;
  commit: string;
}

/** The snapshot ref of a binding's commit on the Git Server. */
export const snapshotRef = (bindingId: string, commit: string): string =>
  `refs/ora/upstreams/${bindingId}/snapshots/${commit}`;

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const BINDING_ID = /^[a-z0-9][-a-z0-9]{0,127}$/;

/** A sync request as the Git Server accepts it (400 invalid_sync_request otherwise). */
export function validateSyncRequest(body: unknown): SyncRequest {
  const bad = (why: string): never => {
    throw new DevwsError('invalid_sync_request', 400, why);
  };
  if (!body || typeof body !== 'object') return bad('the request is not an object');
  const r = body as Record<string, unknown>;
  const str = (k: string): string => (typeof r[k] === 'string' ? r[k] : bad(`${k} must be a string`));
  const opt = (k: string): string | undefined => (r[k] === undefined ? undefined : str(k));
  const out: SyncRequest = { namespace: str('namespace'), project: str('project') };
  for (const k of ['bindingId', 'url', 'branch'] as const) {
    const v = opt(k);
    if (v !== undefined) out[k] = v;
  }
  if (!DNS_LABEL.test(out.namespace)) bad('namespace is not a DNS label');
  if (!DNS_SUBDOMAIN.test(out.project)) bad('project is not a DNS subdomain');
  return out;
}

/**
 * The sync target of a request, from the Project object: 404 project_not_found; 409
 * project_not_syncable (not provisioning/active, or no binding yet); 409 sync_target_mismatch when
 * the request names another repository, branch or binding; the Project's URL must be a valid
 * repository URL (https or ssh), its branch a valid ref (400 as the admission rules).
 */
export function syncTarget(r: SyncRequest, p: Project | undefined): SyncTarget {
  const name = `${r.namespace}/${r.project}`;
  if (!p) throw new GitAccessError('project_not_found', 404, `Project ${name} does not exist`);
  const st = p.status ?? {};
  if ((st.lifecycle !== 'provisioning' && st.lifecycle !== 'active') || !st.bindingId || !BINDING_ID.test(st.bindingId))
    throw new GitAccessError('project_not_syncable', 409, `Project ${name} is ${st.lifecycle ?? 'not initialised'}`);
  const t: SyncTarget = {
    namespace: r.namespace,
    project: r.project,
    bindingId: st.bindingId,
    url: p.spec.repository.url,
    branch: p.spec.repository.defaultBranch,
    ...(p.spec.repository.credentialRef ? { credentialRef: p.spec.repository.credentialRef } : {}),
  };
  for (const k of ['bindingId', 'url', 'branch'] as const) {
    if (r[k] !== undefined && r[k] !== t[k])
      throw new GitAccessError('sync_target_mismatch', 409, `${k} is not the binding of Project ${name}`);
  }
  validateRepositoryUrl(t.url);
  validateRefName(t.branch);
  return t;
}
