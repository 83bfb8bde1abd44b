/**
 * devws-sync's decisions (ADR 0020, seed 002 "Git Server"), pure: a Project whose binding has no
 * snapshot yet gets one sync, and one more each time its spec.syncRequests is bumped (a re-sync,
 * started once the sync before it ended). The sync is first recorded as running in the Project's status (the
 * durable intent: delete_project waits for it, the clone step defers snapshot_not_ready), then
 * the Git Server is asked to fetch, then the snapshot and the outcome are recorded. A failed fetch
 * fails the sync (the create operation then fails repository_sync_failed); an unanswered call is
 * never read as a failure: it is asked again (the Git Server's sync is idempotent).
 */
import { API_VERSION, D, type Project, type ProjectStatus } from '../../lib/devws/api.ts';
import { eventOp, involvedOf } from '../../lib/fn/events.ts';
import type { SyncRequest, SyncResult } from '../../lib/devws/sync.ts';
import type { Operation as FnOp } from '../../lib/fn/types.ts';

/** Wait before asking a Git Server again that did not answer. */
export const SYNC_RETRY_MS = 5_000;

export type SyncOutcome =
  | { kind: 'synced'; result: SyncResult }
  | { kind: 'failed'; message: string }
  | { kind: 'unanswered'; message: string };

export type SyncDecision = { kind: 'ops'; ops: FnOp[] } | { kind: 'call'; request: SyncRequest };

const writeStatus = (p: Project, status: ProjectStatus): FnOp => ({
  op: 'status',
  resource: D.projects,
  object: { ...p, status },
});

/** The name of the Project's n-th sync operation (recorded in status.sync.operationId). */
export const syncOperationId = (p: Project, n = 1): string => `${p.metadata.name ?? ''}-sync-${n}`;

/** The number of the Project's last sync (from its operationId), 0 before the first. */
export function syncNumber(p: Project): number {
  const m = /-sync-(\d+)$/.exec(p.status?.sync?.operationId ?? '');
  return m ? Number(m[1]) : p.status?.sync ? 1 : 0;
}

/**
 * Whether the Project needs a new sync: the first (no sync and no snapshot yet), or a re-sync the
 * user asked for (spec.syncRequests above what the last sync answered) once the last one ended.
 */
export function wantsSync(p: Project): boolean {
  const st = p.status ?? {};
  if (!st.sync) return !st.snapshot || (p.spec.syncRequests ?? 0) > 0;
  return st.sync.state !== 'running' && (p.spec.syncRequests ?? 0) > (st.sync.requestsSeen ?? 0);
}

/** Records a new sync as running (the durable intent), answering the current spec.syncRequests. */
function startSync(p: Project, now: Date): FnOp[] {
  const st = p.status ?? {};
  const operationId = syncOperationId(p, syncNumber(p) + 1);
  const requestsSeen = p.spec.syncRequests ?? 0;
  const ops = [writeStatus(p, { ...st, sync: { state: 'running', operationId, requestsSeen } })];
  if (!st.sync) return ops;
  const message = `${operationId}: sync ${p.spec.repository.defaultBranch} again (syncRequests ${requestsSeen})`;
  const e = { type: 'Normal' as const, reason: 'RepositorySyncStarted', message, key: operationId };
  return [...ops, eventOp(involvedOf(p, API_VERSION, 'Project'), e, now, 'devws-sync')];
}

/**
 * What to do for a Project: nothing (no Git Server, not initialised, being deleted, synced and no
 * re-sync asked for), record a new sync as running, or call the Git Server for the running one.
 */
export function decideSync(p: Project, gitServerConfigured: boolean, now: Date): SyncDecision {
  const st = p.status ?? {};
  const live = st.lifecycle === 'provisioning' || st.lifecycle === 'active';
  if (!gitServerConfigured || !live || !st.bindingId) return { kind: 'ops', ops: [] };
  if (wantsSync(p)) return { kind: 'ops', ops: startSync(p, now) };
  if (st.sync?.state !== 'running') return { kind: 'ops', ops: [] };
  const request: SyncRequest = {
    namespace: p.metadata.namespace ?? '',
    project: p.metadata.name ?? '',
    bindingId: st.bindingId,
    url: p.spec.repository.url,
    branch: p.spec.repository.defaultBranch,
  };
  return { kind: 'call', request };
}

/** Records the Git Server's answer on the Project (the snapshot and the sync outcome together), with an Event. */
export function afterSync(p: Project, o: SyncOutcome, now: Date): FnOp[] {
  const st = p.status ?? {};
  const operationId = st.sync?.operationId ?? syncOperationId(p);
  if (o.kind === 'unanswered') return [{ op: 'requeue', afterMs: SYNC_RETRY_MS }];
  const involved = involvedOf(p, API_VERSION, 'Project');
  if (o.kind === 'failed') {
    // A failed re-sync keeps the snapshot before it: Workspaces go on cloning that one.
    const e = { type: 'Warning' as const, reason: 'RepositorySyncFailed', message: o.message, key: operationId };
    const sync = { ...st.sync, state: 'failed' as const, operationId };
    return [writeStatus(p, { ...st, sync }), eventOp(involved, e, now, 'devws-sync')];
  }
  const message = `snapshot ${o.result.ref}`;
  return [
    writeStatus(p, {
      ...st,
      snapshot: { ref: o.result.ref, commit: o.result.commit },
      sync: { ...st.sync, state: 'succeeded', operationId },
    }),
    eventOp(involved, { type: 'Normal', reason: 'RepositorySynced', message, key: operationId }, now, 'devws-sync'),
  ];
}

/**
 * A Project that is gone (or recorded deleted) has its repository removed from the Git Server
 * (ADR 0026): the namespace/project to remove, from the object or the watch key of a deleted one.
 */
export function removalOf(key: string, p: Project | undefined): { namespace: string; project: string } | undefined {
  if (p) {
    if (p.status?.lifecycle !== 'deleted') return undefined;
    return { namespace: p.metadata.namespace ?? '', project: p.metadata.name ?? '' };
  }
  const [namespace, project] = key.split('/');
  return namespace && project ? { namespace, project } : undefined;
}
