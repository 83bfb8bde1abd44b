/**
 * devws-controller's decisions (ADR 0020): initialise Projects (main Workspace + create_project
 * Operation) and isolated Workspaces (create_workspace Operation), then drive each Operation one
 * step at a time: explicit retry, the one-unfinished-per-Project fence, reconciliation of effects
 * of an older lease epoch, claim, and the step functions of steps.ts.
 */
import {
  API_VERSION,
  D,
  DevwsError,
  type Operation,
  type OperationStatus,
  type Project,
  type Workspace,
} from '../../lib/devws/api.ts';
import { effectsToReconcile, reconcileAbsent, recordEffect } from '../../lib/devws/effects.ts';
import { projectAfter } from '../../lib/devws/lifecycle.ts';
import { hasPluginWork } from '../../lib/devws/plugins.ts';
import {
  block,
  claim,
  explicitRetry,
  fail,
  initialStatus,
  isUnfinished,
  oldestUnfinished,
} from '../../lib/devws/operations.ts';
import { eventOp, involvedOf, type EventSpec } from '../../lib/fn/events.ts';
import type { Operation as FnOp, State } from '../../lib/fn/types.ts';
import { HEARTBEAT_WINDOW_MS, nodeDisconnected, nodeIsLive, nodeReconnected } from '../../lib/devws/fencing.ts';
import { currentNodeReport, nodeFromReport } from '../../lib/devws/node-report.ts';
import { kubernetesSubstrate, type Substrate } from './substrate.ts';
import {
  lateCloneResult,
  stepClone,
  stepCleanup,
  stepDone,
  stepNode,
  stepPlugin,
  stepQuiesce,
  stepSandbox,
  stepTerminate,
  writeOp,
  writeWs,
  type Ctx,
  type OpCtx,
} from './steps.ts';
import {
  deleteCleanup,
  deleteQuiesce,
  deleteTerminate,
  projectGone,
  syncHold,
  type ProjectCtx,
} from './project-delete.ts';

export function initProject(p: Project): FnOp[] {
  if (p.status?.lifecycle) return [];
  const ns = p.metadata.namespace ?? '';
  const name = p.metadata.name ?? '';
  const owner = [{ apiVersion: API_VERSION, kind: 'Project', name, uid: p.metadata.uid ?? '', controller: true }];
  const ws: Workspace = {
    apiVersion: API_VERSION,
    kind: 'Workspace',
    metadata: { name: `${name}-main`, namespace: ns, ownerReferences: owner },
    spec: { project: name, kind: 'main', desiredState: 'running' },
  };
  const op: Operation = {
    apiVersion: API_VERSION,
    kind: 'Operation',
    metadata: { name: `${name}-create`, namespace: ns, ownerReferences: owner },
    spec: { project: name, workspace: `${name}-main`, kind: 'create_project' },
  };
  return [
    { op: 'create', resource: D.workspaces, object: ws },
    { op: 'create', resource: D.operations, object: op },
    {
      op: 'status',
      resource: D.projects,
      object: { ...p, status: { ...p.status, lifecycle: 'provisioning', bindingId: p.metadata.uid } },
    },
  ];
}

export function initWorkspace(ws: Workspace, p: Project | undefined): FnOp[] {
  if (ws.status?.observedState || !p) return [];
  const opName = ws.spec.kind === 'main' ? `${p.metadata.name ?? ''}-create` : `${ws.metadata.name ?? ''}-create`;
  const init: FnOp = {
    op: 'status',
    resource: D.workspaces,
    object: {
      ...ws,
      status: {
        observedState: 'provisioning',
        admissionOpen: false,
        admissionEpoch: 0,
        runtimeGeneration: 0,
        operation: { name: opName },
      },
    },
  };
  if (ws.spec.kind === 'main') return [init];
  const op: Operation = {
    apiVersion: API_VERSION,
    kind: 'Operation',
    metadata: { name: opName, namespace: ws.metadata.namespace },
    spec: { project: ws.spec.project, workspace: ws.metadata.name, kind: 'create_workspace' },
  };
  return [{ op: 'create', resource: D.operations, object: op }, init];
}

/**
 * Effects of an older epoch are re-observed by ID (get without creating) before anything else. A
 * substrate that answers with another external ID or another result than the one recorded
 * (external_binding_conflict, external_state_conflict) changes nothing recorded: the operation
 * blocks with that reason, for a person to look at, and is retried only explicitly.
 */
function reconcileEffects(c: OpCtx, s: OperationStatus): OperationStatus {
  let out = s;
  for (const e of effectsToReconcile(s, c.epoch)) {
    const v = e.kind === 'sandbox_ensure' ? c.substrate.sandbox(e.id) : undefined;
    try {
      out = v
        ? recordEffect(out, e.id, { externalId: v.externalId, outcome: 'succeeded', nodeId: v.nodeId }, c.epoch)
        : reconcileAbsent(out, e.id, c.epoch);
    } catch (err) {
      if (err instanceof DevwsError && err.reason.startsWith('external_')) return block(s, err.reason, err.message);
      throw err;
    }
  }
  return out;
}

function finished(c: Ctx | ProjectCtx, s: OperationStatus): FnOp[] {
  const p = c.project;
  const st = s.state === 'succeeded' ? 'succeeded' : 'failed';
  if (c.op.spec.kind === 'delete_project' && st === 'succeeded' && 'workspaces' in c)
    return projectGone(c, c.workspaces);
  const next = projectAfter(p.status ?? {}, c.op.spec.kind, st);
  return next.lifecycle !== p.status?.lifecycle
    ? [{ op: 'status', resource: D.projects, object: { ...p, status: next } }]
    : [];
}

const STEP_FNS: Partial<Record<NonNullable<OperationStatus['step']>, (c: Ctx, s: OperationStatus) => FnOp[]>> = {
  sandbox: stepSandbox,
  node: stepNode,
  clone: stepClone,
  plugin: stepPlugin,
  done: stepDone,
  quiesce: stepQuiesce,
  terminate: stepTerminate,
  cleanup: stepCleanup,
};

/** delete_project acts on every Workspace of the Project at once (project-delete.ts). */
const PROJECT_STEP_FNS: Partial<
  Record<NonNullable<OperationStatus['step']>, (c: ProjectCtx, s: OperationStatus) => FnOp[]>
> = {
  quiesce: deleteQuiesce,
  terminate: deleteTerminate,
  cleanup: deleteCleanup,
};

/** One Event per state or step transition of the Operation (Warning for failed, blocked, retry_wait). */
function withEvent(c: OpCtx, ops: FnOp[]): FnOp[] {
  const w = ops.find((o) => o.op === 'status' && o.resource === D.operations);
  if (!w || w.op !== 'status') return ops;
  const next = w.object.status as OperationStatus;
  const prev = c.op.status ?? {};
  if (next.state === prev.state && next.step === prev.step) return ops;
  const warn = next.state === 'failed' || next.state === 'blocked' || next.state === 'retry_wait';
  const e: EventSpec = {
    type: warn ? 'Warning' : 'Normal',
    reason: warn ? 'OperationDeferredOrFailed' : 'OperationProgress',
    message: `${c.op.spec.kind}: ${next.state ?? ''} on step ${next.step ?? ''}${next.reason ? ` (${next.reason})` : ''}`,
    key: `${next.state ?? ''}|${next.step ?? ''}|${next.cloneAttempts ?? 0}|${next.retriesSeen ?? 0}|${next.retryAt ?? ''}`,
  };
  return [...ops, eventOp(involvedOf(c.op, API_VERSION, 'Operation'), e, c.now, 'devws-controller')];
}

export function reconcileOperation(c: Ctx | ProjectCtx): FnOp[] {
  return withEvent(c, decideOperation(c));
}

function decideOperation(c: Ctx | ProjectCtx): FnOp[] {
  if (!c.op.status?.state) {
    const plugins = hasPluginWork(c.op.spec.kind, c.op, 'ws' in c ? c.ws : undefined);
    return [writeOp(c.op, initialStatus(c.op.spec.kind, plugins))];
  }
  const s = c.op.status;
  if (!isUnfinished(c.op)) return finished(c, s);
  if ((c.op.spec.retryRequests ?? 0) > (s.retriesSeen ?? 0)) {
    const base = { ...s, retriesSeen: c.op.spec.retryRequests };
    return [writeOp(c.op, s.state === 'blocked' || s.state === 'retry_wait' ? explicitRetry(base) : base)];
  }
  const oldest = oldestUnfinished(
    c.op.spec.project,
    c.state.list(D.operations, c.op.metadata.namespace) as Operation[],
  );
  if (oldest && oldest.metadata.name !== c.op.metadata.name) return [writeOp(c.op, fail(s, 'operation_in_progress'))];
  if (effectsToReconcile(s, c.epoch).length > 0) return [writeOp(c.op, reconcileEffects(c, s))];
  const late = 'ws' in c ? lateCloneResult(c, s) : undefined;
  if (late) return late;
  if (s.state !== 'running') return claimStep(c, s);
  return runStep(c, s);
}

/** Claim a queued (or due retry_wait) operation; a delete_project waits for a running sync. */
function claimStep(c: OpCtx, s: OperationStatus): FnOp[] {
  const claimed = claim(s, c.now);
  if (!claimed)
    return s.retryAt ? [{ op: 'requeue', afterMs: Math.max(500, Date.parse(s.retryAt) - c.now.getTime()) }] : [];
  return [writeOp(c.op, syncHold(c, claimed) ?? claimed)];
}

function runStep(c: Ctx | ProjectCtx, s: OperationStatus): FnOp[] {
  if ('workspaces' in c) {
    const step = PROJECT_STEP_FNS[s.step ?? 'done'];
    return step ? step(c, s) : [];
  }
  const step = STEP_FNS[s.step ?? 'done'];
  return step ? step(c, s) : [];
}

export interface LeaseLike {
  spec?: { leaseTransitions?: number };
}

export function leaseEpoch(lease: LeaseLike | undefined): number {
  return lease?.spec?.leaseTransitions ?? 0;
}

export interface GitServerConfig {
  url?: string;
  ca?: string;
}

export function contextFor(
  op: Operation,
  state: State,
  now: Date,
  epoch: number,
  git: GitServerConfig & { substrate?: Substrate } = {},
): Ctx | ProjectCtx | undefined {
  const ns = op.metadata.namespace ?? '';
  const project = state.get(D.projects, ns, op.spec.project) as Project | undefined;
  if (!project) return undefined;
  const base: OpCtx = {
    op,
    project,
    state,
    now,
    epoch,
    gitServer: git.url,
    gitServerCA: git.ca,
    substrate: git.substrate ?? kubernetesSubstrate(state, ns),
  };
  if (op.spec.kind === 'delete_project') {
    const all = state.list(D.workspaces, ns) as Workspace[];
    return { ...base, workspaces: all.filter((w) => w.spec.project === op.spec.project) };
  }
  const ws = op.spec.workspace ? (state.get(D.workspaces, ns, op.spec.workspace) as Workspace | undefined) : undefined;
  return ws ? { ...base, ws } : undefined;
}

/**
 * Between operations the Controller reports Node disconnects: the sandbox Pod no longer running or
 * the Node's heartbeat older than 30 s makes a ready Workspace unavailable and closes admission;
 * the same initialised Node (same nodeId and incarnation) with a fresh heartbeat restores it. An
 * unavailable Workspace whose Node never disconnected (e.g. a failed clone) is not touched.
 */
export function nodeHealth(ws: Workspace, state: State, now: Date, substrate?: Substrate): FnOp[] {
  const st = ws.status;
  const sb = st?.sandbox;
  if (!st?.node || !sb || sb.terminated) return [];
  const sub = substrate ?? kubernetesSubstrate(state, ws.metadata.namespace ?? '');
  const r = sub.sandbox(sb.id)?.ready ? currentNodeReport(st, ws.metadata.annotations) : undefined;
  const live = r && nodeIsLive(nodeFromReport(st, r, now), now) ? r : undefined;
  if (st.observedState === 'ready') {
    if (!live) return [writeWs(ws, nodeDisconnected(st))];
    // Wake up when this heartbeat expires, should no newer report arrive before.
    const expiry = Date.parse(live.heartbeatAt) + HEARTBEAT_WINDOW_MS + 1000;
    return [{ op: 'requeue', afterMs: Math.max(1000, expiry - now.getTime()) }];
  }
  if (st.observedState !== 'unavailable' || st.node.connected !== false || !live) return [];
  const next = nodeReconnected(st, live, now);
  return next === st ? [] : [writeWs(ws, next)];
}
