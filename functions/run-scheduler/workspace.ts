/**
 * PersistentWorkspace fencing (seed 000, "Workspace scheduler Filter plugin").
 *
 * A Run referencing a PersistentWorkspace may only be placed on the workspace's bound Runtime
 * Pod, and only while the workspace is Bound and not being deleted, belongs to the Run's Runtime
 * and status.boundPodUID equals that Pod's UID. Missing, Pending, Lost, Released, deleting,
 * Runtime-incompatible and UID-mismatched workspaces leave the Run Pending with an explicit
 * message: none of them is a terminal scheduling failure (workspace changes requeue the Run).
 */
import type { RunView, RuntimePod, WaitReason, WorkspaceView } from './types.ts';

/** Where a workspace allows its Runs to go. */
export interface WorkspaceFence {
  workspace: string;
  pod: string;
  uid: string;
}

export type WorkspaceState = { ok: true; fence?: WorkspaceFence } | { ok: false; reason: WaitReason; message: string };

/** Looks a Run's workspace up by "<namespace>/<name>" first, then by name. */
export function lookupWorkspace(run: RunView, workspaces: Map<string, WorkspaceView>): WorkspaceView | undefined {
  const name = run.workspace?.name;
  if (name === undefined) return undefined;
  return workspaces.get(`${run.namespace}/${name}`) ?? workspaces.get(name);
}

function wait(reason: WaitReason, message: string): WorkspaceState {
  return { ok: false, reason, message };
}

function boundState(ws: WorkspaceView, q: string): WorkspaceState {
  if (!ws.boundPod) return wait('WorkspacePending', `waiting for PersistentWorkspace ${q} to be bound`);
  if (!ws.boundPodUID) {
    return wait(
      'WorkspacePodUIDMismatch',
      `waiting for PersistentWorkspace ${q}: it is bound to runtime pod "${ws.boundPod}" without status.boundPodUID`,
    );
  }
  return { ok: true, fence: { workspace: ws.name, pod: ws.boundPod, uid: ws.boundPodUID } };
}

/** The Pod-independent part of workspace fencing: can the workspace host Runs at all, and where. */
export function workspaceState(run: RunView, runtime: string, workspaces: Map<string, WorkspaceView>): WorkspaceState {
  if (!run.workspace) return { ok: true };
  const q = JSON.stringify(run.workspace.name);
  const ws = lookupWorkspace(run, workspaces);
  if (!ws) return wait('WorkspaceNotFound', `waiting for PersistentWorkspace ${q}: not found`);
  if (ws.runtime !== runtime) {
    return wait(
      'WorkspaceRuntimeMismatch',
      `waiting for PersistentWorkspace ${q}: it belongs to runtime ${JSON.stringify(ws.runtime)}, not runtime ${JSON.stringify(runtime)}`,
    );
  }
  if (ws.deleting && ws.phase !== 'Lost') {
    return wait(
      'WorkspaceDeleting',
      `waiting for PersistentWorkspace ${q}: it is being deleted and cannot be claimed by new Runs`,
    );
  }
  switch (ws.phase) {
    case 'Bound':
      return boundState(ws, q);
    case 'Lost':
      return wait(
        'WorkspaceLost',
        `waiting for PersistentWorkspace ${q}: it is Lost (its bound runtime pod is gone) and is never rebound`,
      );
    case 'Released':
      return wait(
        'WorkspaceReleased',
        `waiting for PersistentWorkspace ${q}: it is Released and cannot be claimed by new Runs`,
      );
    default:
      return wait('WorkspacePending', `waiting for PersistentWorkspace ${q} to be bound`);
  }
}

/** Whether the fence admits this Pod (same name and same UID). */
export function fenceAdmits(fence: WorkspaceFence | undefined, pod: RuntimePod): boolean {
  return fence === undefined || (pod.name === fence.pod && pod.uid === fence.uid);
}

/**
 * Why no Pod is admitted by the fence, given the Run's candidate Pods, or undefined when some
 * Pod is admitted.
 */
export function fenceRejection(
  fence: WorkspaceFence,
  pods: RuntimePod[],
): { reason: WaitReason; message: string } | undefined {
  if (pods.some((pod) => fenceAdmits(fence, pod))) return undefined;
  const q = JSON.stringify(fence.workspace);
  const sameName = pods.find((pod) => pod.name === fence.pod);
  if (!sameName) {
    return {
      reason: 'WorkspacePodUnavailable',
      message: `waiting for PersistentWorkspace ${q}: bound runtime pod "${fence.pod}" not found`,
    };
  }
  return {
    reason: 'WorkspacePodUIDMismatch',
    message: `waiting for PersistentWorkspace ${q}: runtime pod "${fence.pod}" has UID "${sameName.uid}", but the workspace is bound to UID "${fence.uid}"`,
  };
}

export function workspacePodUnavailable(fence: WorkspaceFence): { reason: WaitReason; message: string } {
  return {
    reason: 'WorkspacePodUnavailable',
    message: `waiting for bound runtime pod "${fence.pod}" of PersistentWorkspace ${JSON.stringify(fence.workspace)} to become available`,
  };
}

/**
 * Invariant check used by tests and callers: may this Run run on this Pod as far as workspace
 * fencing is concerned?
 */
export function workspaceAllows(
  run: RunView,
  pod: RuntimePod,
  runtime: string,
  workspaces: Map<string, WorkspaceView>,
): boolean {
  const state = workspaceState(run, runtime, workspaces);
  return state.ok && fenceAdmits(state.fence, pod);
}
