/**
 * Project and Workspace lifecycle around operations (seed 002 "聚合" and the public API):
 * Project provisioning -> active -> deleting -> deleted, active after its create operation ends
 * either way; start needs an initialised stopped Workspace; only isolated Workspaces are deleted
 * alone; the observed state each operation kind leaves behind; the ready commit point.
 */
import {
  DevwsError,
  type ObservedState,
  type Operation,
  type OperationKind,
  type ProjectStatus,
  type Workspace,
  type WorkspaceStatus,
} from './api.ts';
import { nodeIsLive } from './fencing.ts';

/** The Project's lifecycle once an operation of it is finished. */
export function projectAfter(p: ProjectStatus, kind: OperationKind, state: 'succeeded' | 'failed'): ProjectStatus {
  if (kind === 'create_project') return { ...p, lifecycle: 'active' };
  if (kind === 'delete_project') return { ...p, lifecycle: state === 'succeeded' ? 'deleted' : 'active' };
  return p;
}

/** A lifecycle request for the Workspace is allowed (409 workspace_not_startable, main_workspace_not_deletable). */
export function assertRequestAllowed(kind: OperationKind, ws: Workspace): void {
  const st = ws.status ?? {};
  if (kind === 'start' && (!st.baseCommitId || st.observedState !== 'stopped')) {
    throw new DevwsError(
      'workspace_not_startable',
      409,
      'start needs an initialised (base_commit_id set), stopped Workspace',
    );
  }
  if (kind === 'delete_workspace' && ws.spec.kind === 'main') {
    throw new DevwsError('main_workspace_not_deletable', 409, 'the main Workspace is deleted only with its Project');
  }
  if (kind === 'stop' && st.observedState === 'stopped') {
    throw new DevwsError('workspace_already_stopped', 409, 'the Workspace is already stopped');
  }
}

/** The observed state a Workspace enters when its operation starts. */
export function observedWhileRunning(kind: OperationKind): ObservedState | undefined {
  const m: Partial<Record<OperationKind, ObservedState>> = {
    create_project: 'provisioning',
    create_workspace: 'provisioning',
    start: 'starting',
    restart: 'stopping',
    stop: 'stopping',
    delete_workspace: 'deleting',
    delete_project: 'deleting',
  };
  return m[kind];
}

/** The observed state after a succeeded operation (undefined: unchanged). */
export function observedAfterSuccess(kind: OperationKind): ObservedState | undefined {
  if (kind === 'stop') return 'stopped';
  if (kind === 'delete_workspace' || kind === 'delete_project') return 'deleted';
  if (kind === 'install_plugin' || kind === 'remove_plugin') return undefined;
  return 'ready';
}

/**
 * The commit point of "Workspace ready and operation succeeded together": only after a last Node
 * check (409 node_not_live otherwise, and admission stays closed).
 */
export function commitReady(ws: WorkspaceStatus, op: Operation, now: Date): WorkspaceStatus {
  if (!nodeIsLive(ws, now))
    throw new DevwsError('node_not_live', 409, 'the Node is gone or its heartbeat is stale; admission stays closed');
  return {
    ...ws,
    observedState: 'ready',
    admissionOpen: true,
    operation: { name: op.metadata.name ?? '', state: 'succeeded', step: 'done' },
  };
}
