/**
 * devws-sync's decisions (ADR 0020, seed 002 "Git Server"), pure: a Project whose binding has no
 * snapshot yet gets one sync. The sync is first recorded as running in the Project's status (the
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

/** The name of the Project's first sync operation (recorded in status.sync.operationId). */
export const syncOperationId = (p: Project): string => `${p.metadata.name ?? ''}-sync-1`;

/**
 * What to do for a Project: nothing (no Git Server, not initialised, being deleted, already
 * synced, or failed), record a new sync as running, or call the Git Server for the running one.
 */
export function decideSync(p: Project, gitServerConfigured: boolean): SyncDecision {
  const st = p.status ?? {};
  const live = st.lifecycle === 'provisioning' || st.lifecycle === 'active';
  if (!gitServerConfigured || !live || !st.bindingId) return { kind: 'ops', ops: [] };
  if (!st.sync) {
    if (st.snapshot) return { kind: 'ops', ops: [] };
    return {
      kind: 'ops',
      ops: [writeStatus(p, { ...st, sync: { state: 'running', operationId: syncOperationId(p) } })],
    };
  }
  if (st.sync.state !== 'running') return { kind: 'ops', ops: [] };
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
    const e = { type: 'Warning' as const, reason: 'RepositorySyncFailed', message: o.message, key: operationId };
    return [writeStatus(p, { ...st, sync: { state: 'failed', operationId } }), eventOp(involved, e, now, 'devws-sync')];
  }
  const message = `snapshot ${o.result.ref}`;
  return [
    writeStatus(p, {
      ...st,
      snapshot: { ref: o.result.ref, commit: o.result.commit },
      sync: { state: 'succeeded', operationId },
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
