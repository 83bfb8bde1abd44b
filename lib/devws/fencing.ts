/**
 * Generation fencing (seed 002 "代次隔离旧实例") and Node liveness: a new sandbox is planned only
 * after the old one is confirmed terminated; Node registrations and reports are bound to the
 * current generation and live sandbox (409 stale_node, stale_sandbox); a Node disconnect closes
 * admission and the same initialised Node reconnecting restores it.
 */
import { DevwsError, type NodeInstance, type WorkspaceStatus } from './api.ts';

export const HEARTBEAT_WINDOW_MS = 30_000;

/** The node step's condition: an initialised, connected Node of the current generation on the live sandbox, heartbeat within 30 s, nodeId as ensured. */
export function nodeIsLive(ws: WorkspaceStatus, now: Date): boolean {
  const n = ws.node;
  const sb = ws.sandbox;
  if (!n || !sb || sb.terminated) return false;
  if (!n.initialized || !n.connected) return false;
  if (n.generation !== ws.runtimeGeneration || sb.generation !== ws.runtimeGeneration) return false;
  if (n.sandboxId !== sb.id || !sb.nodeId || n.nodeId !== sb.nodeId) return false;
  const beat = Date.parse(n.heartbeatAt ?? '');
  return Number.isFinite(beat) && now.getTime() - beat <= HEARTBEAT_WINDOW_MS;
}

export interface NodeReport {
  generation: number;
  sandboxId: string;
  nodeId: string;
}

/** A Node report must belong to the current generation and the live sandbox. */
export function assertCurrentNode(ws: WorkspaceStatus, r: NodeReport): void {
  if (r.generation !== (ws.runtimeGeneration ?? 0)) {
    throw new DevwsError(
      'stale_node',
      409,
      `report of generation ${r.generation}, current is ${ws.runtimeGeneration ?? 0}`,
    );
  }
  const sb = ws.sandbox;
  if (!sb || sb.terminated || sb.id !== r.sandboxId) {
    throw new DevwsError('stale_sandbox', 409, `sandbox ${r.sandboxId} is not the Workspace's live sandbox`);
  }
}

/** Registers a Node (fenced), replacing any previous instance on the same sandbox. */
export function registerNode(ws: WorkspaceStatus, r: NodeReport & { incarnation: string }, now: Date): WorkspaceStatus {
  assertCurrentNode(ws, r);
  const node: NodeInstance = {
    nodeId: r.nodeId,
    incarnation: r.incarnation,
    sandboxId: r.sandboxId,
    generation: r.generation,
    initialized: true,
    connected: true,
    heartbeatAt: now.toISOString(),
  };
  return { ...ws, node };
}

/**
 * Plans the next sandbox generation: only when no sandbox is live (the old one is confirmed
 * terminated). Otherwise 409 sandbox_not_terminated and no generation is allocated.
 */
export function nextGeneration(ws: WorkspaceStatus): number {
  if (ws.sandbox && !ws.sandbox.terminated) {
    throw new DevwsError('sandbox_not_terminated', 409, `sandbox ${ws.sandbox.id} is not confirmed terminated`);
  }
  return (ws.runtimeGeneration ?? 0) + 1;
}

/** The Controller reports the Node disconnected: a ready Workspace becomes unavailable, admission closes. */
export function nodeDisconnected(ws: WorkspaceStatus): WorkspaceStatus {
  const node = ws.node ? { ...ws.node, connected: false } : undefined;
  if (ws.observedState !== 'ready') return { ...ws, node };
  return {
    ...ws,
    node,
    observedState: 'unavailable',
    admissionOpen: false,
    admissionEpoch: (ws.admissionEpoch ?? 0) + 1,
  };
}

/** The same initialised Node (same nodeId and incarnation) reconnects: an unavailable Workspace is ready again. */
export function nodeReconnected(
  ws: WorkspaceStatus,
  r: NodeReport & { incarnation: string },
  now: Date,
): WorkspaceStatus {
  assertCurrentNode(ws, r);
  const n = ws.node;
  const same = !!n && n.initialized && n.nodeId === r.nodeId && n.incarnation === r.incarnation;
  if (!same) return ws;
  const node = { ...n, connected: true, heartbeatAt: now.toISOString() };
  if (ws.observedState !== 'unavailable') return { ...ws, node };
  return { ...ws, node, observedState: 'ready', admissionOpen: true };
}
