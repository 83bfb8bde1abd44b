/**
 * The repository sync of a Project's binding (seed 002 "Git Server"): the sync function asks the
 * Git Server to fetch the binding branch of the external repository and records the snapshot it
 * made in the Project's status. This is the request both sides agree on, and its validation.
 */
import { DevwsError } from './api.ts';
import { validateRefName, validateRepositoryUrl } from './validate.ts';

export interface SyncRequest {
  namespace: string;
  project: string;
  bindingId: string;
  /** The external repository (https only: the Git Server holds no ssh keys). */
  url: string;
  branch: string;
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
  const out: SyncRequest = {
    namespace: str('namespace'),
    project: str('project'),
    bindingId: str('bindingId'),
    url: str('url'),
    branch: str('branch'),
  };
  if (!DNS_LABEL.test(out.namespace)) bad('namespace is not a DNS label');
  if (!DNS_SUBDOMAIN.test(out.project)) bad('project is not a DNS subdomain');
  if (!BINDING_ID.test(out.bindingId)) bad('bindingId is not a lower-case id');
  validateRepositoryUrl(out.url);
  if (!out.url.startsWith('https://')) bad('only https repositories can be synced');
  validateRefName(out.branch);
  return out;
}
