/**
 * Stop, restart and delete prove idleness first (seed 002 "停止要先证明空闲"): in one write the
 * controller checks that no execution is unfinished, closes admission and bumps admission_epoch;
 * then only an idle proof of the Node for that epoch advances the quiesce step. A Node that is not
 * idle fails the operation resource_in_use and the Workspace returns to its previous state. No
 * Node, a stale heartbeat or an unknown answer never advances.
 */
import type { ObservedState, OperationStatus, WorkspaceStatus } from './api.ts';
import { nodeIsLive } from './fencing.ts';
import { advance, fail } from './operations.ts';

export interface QuiesceStart {
  workspace?: WorkspaceStatus;
  operation: OperationStatus;
}

/** Enter quiesce: the single write that closes admission and bumps the epoch (or fails). */
export function beginQuiesce(ws: WorkspaceStatus, op: OperationStatus, unfinishedExecutions: number): QuiesceStart {
  if (unfinishedExecutions > 0) {
    return { operation: fail(op, 'resource_in_use', `${unfinishedExecutions} execution(s) unfinished`) };
  }
  const before: ObservedState = op.workspaceBefore ?? ws.observedState ?? 'stopped';
  const stopping: ObservedState = 'stopping';
  return {
    workspace: {
      ...ws,
      admissionOpen: false,
      admissionEpoch: (ws.admissionEpoch ?? 0) + 1,
      observedState: ws.sandbox && !ws.sandbox.terminated ? stopping : ws.observedState,
    },
    operation: { ...op, workspaceBefore: before },
  };
}

export type QuiesceDecision =
  | { kind: 'advance'; operation: OperationStatus }
  | { kind: 'wait'; why: string }
  | { kind: 'refused'; operation: OperationStatus; workspace: WorkspaceStatus };

/** Decides the quiesce step from the Workspace's idle proof and Node liveness. */
export function decideQuiesce(ws: WorkspaceStatus, op: OperationStatus, now: Date): QuiesceDecision {
  const live = ws.sandbox && !ws.sandbox.terminated;
  if (!live) return { kind: 'advance', operation: advance(op) };
  if (!nodeIsLive(ws, now)) return { kind: 'wait', why: 'no live Node with a fresh heartbeat' };
  const proof = ws.idleProof;
  if (!proof || proof.epoch !== ws.admissionEpoch)
    return { kind: 'wait', why: 'no idle proof for the current admission epoch' };
  if (proof.idle) return { kind: 'advance', operation: advance(op) };
  return {
    kind: 'refused',
    operation: fail(op, 'resource_in_use', 'the Node reported it is not idle'),
    workspace: restoreAfterRefusal(ws, op.workspaceBefore),
  };
}

/** resource_in_use: the Workspace returns to its state before the operation (admission reopens if it was ready). */
export function restoreAfterRefusal(ws: WorkspaceStatus, before: ObservedState | undefined): WorkspaceStatus {
  const state = before ?? ws.observedState;
  return { ...ws, observedState: state, admissionOpen: state === 'ready' };
}
