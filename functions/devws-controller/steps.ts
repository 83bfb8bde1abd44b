/**
 * One function per step of an operation (seed 002's step table), each deciding from the observed
 * Operation, Workspace and substrate objects with the pure core in lib/devws, and returning the
 * writes: the Operation's status (the durable intent) first, then the Workspace, then the
 * substrate calls.
 */
import {
  DevwsError,
  type Operation,
  type OperationStatus,
  type Project,
  type Workspace,
  type WorkspaceStatus,
} from '../../lib/devws/api.ts';
import { applyCloneResult, freezeCloneInput, type CloneResult } from '../../lib/devws/clone.ts';
import { effectId, findEffect, markSent, planEffect, recordEffect } from '../../lib/devws/effects.ts';
import { nextGeneration, nodeDisconnected, nodeIsLive } from '../../lib/devws/fencing.ts';
import { beginQuiesce, decideQuiesce } from '../../lib/devws/idle.ts';
import { commitReady, observedAfterSuccess, observedWhileRunning } from '../../lib/devws/lifecycle.ts';
import { advance, block } from '../../lib/devws/operations.ts';
import { workspaceBranch } from '../../lib/devws/validate.ts';
import type { Operation as FnOp, State } from '../../lib/fn/types.ts';
import { D, type Effect } from '../../lib/devws/api.ts';
import { currentNodeReport, nodeFromReport } from '../../lib/devws/node-report.ts';
import { freezePlugins, pluginInstancesAfter, pluginsDone, recordPluginResults } from '../../lib/devws/plugins.ts';
import type { SandboxOptions, Substrate } from './substrate.ts';
import { sameJson } from '../../lib/kube/same-json.ts';

/** What every operation's decision sees. */
export interface OpCtx {
  op: Operation;
  project: Project;
  state: State;
  now: Date;
  epoch: number;
  /** The Git Server: base URL (undefined: not configured) and the CA bundle its TLS certificate chains to. */
  gitServer?: string;
  gitServerCA?: string;
  /** The Project's substrate, as observed before this decision. */
  substrate: Substrate;
}

/** An operation on one Workspace (every kind but delete_project). */
export interface Ctx extends OpCtx {
  ws: Workspace;
}

export const writeOp = (op: Operation, status: OperationStatus): FnOp => ({
  op: 'status',
  resource: D.operations,
  object: { ...op, status },
});
export const writeWs = (ws: Workspace, status: WorkspaceStatus): FnOp => ({
  op: 'status',
  resource: D.workspaces,
  object: { ...ws, status },
});
export const requeue = (ms: number): FnOp => ({ op: 'requeue', afterMs: ms });
const endsReady = (c: Ctx): boolean => observedAfterSuccess(c.op.spec.kind) === 'ready';
const opRef = (c: Ctx, s: OperationStatus): WorkspaceStatus['operation'] => ({
  name: c.op.metadata.name ?? '',
  state: s.state,
  step: s.step,
});

/**
 * Writes the Operation and mirrors its state onto the Workspace. While the operation goes on, the
 * Operation (the durable intent) is written first; when it finishes, the Workspace is written
 * first: its status.operation is the commit point, so a finished Operation always has its
 * Workspace outcome written, and a failed Operation write only repeats the (idempotent) step.
 */
function both(c: Ctx, s: OperationStatus, ws: WorkspaceStatus): FnOp[] {
  if (s.state === 'succeeded' || s.state === 'failed') return workspaceFirst(c, s, ws);
  return [writeOp(c.op, s), BARRIER, writeWs(c.ws, { ...ws, operation: opRef(c, s) })];
}

/** The Workspace write, then (only when it succeeded) the Operation write. */
function workspaceFirst(c: Ctx, s: OperationStatus, ws: WorkspaceStatus): FnOp[] {
  return [writeWs(c.ws, { ...ws, operation: opRef(c, s) }), BARRIER, writeOp(c.op, s)];
}

/**
 * The host sends consecutive status writes in parallel (lib/fn/execute.ts); a requeue between two
 * writes makes the second wait for the first and not happen when the first fails (409).
 */
export const BARRIER: FnOp = { op: 'requeue', afterMs: 1000 };

/** The Git Server's CA is not baked into the sandbox: each clone takes the configured one (stepClone). */
const sandboxOptions = (generation: number): SandboxOptions => ({ generation });

/**
 * The Workspace as the Operation's evidence shows it: a succeeded sandbox_terminate of its sandbox
 * means terminated, even when the Workspace write that recorded it was lost (a 409 after the
 * Operation had advanced); without this the next generation would block sandbox_not_terminated.
 */
export function withTerminateEvidence(wst: WorkspaceStatus, s: OperationStatus): WorkspaceStatus {
  const sb = wst.sandbox;
  if (!sb || sb.terminated) return wst;
  const done = (s.effects ?? []).some(
    (e) => e.kind === 'sandbox_terminate' && e.externalId === sb.id && e.outcome === 'succeeded' && e.terminated,
  );
  return done ? { ...wst, sandbox: { ...sb, terminated: true }, node: undefined } : wst;
}

/** The Workspace naming the planned sandbox `id` of generation `gen` as its live one (no Node yet). */
function namingSandbox(c: Ctx, wst: WorkspaceStatus, id: string, gen: number): WorkspaceStatus {
  const observed =
    observedWhileRunning(c.op.spec.kind) === 'stopping' ? 'starting' : observedWhileRunning(c.op.spec.kind);
  return { ...wst, observedState: observed, runtimeGeneration: gen, sandbox: { id, generation: gen }, node: undefined };
}

export function stepSandbox(c: Ctx, s: OperationStatus): FnOp[] {
  const wst = withTerminateEvidence(c.ws.status ?? {}, s);
  const planned = (s.effects ?? []).find((e) => e.kind === 'sandbox_ensure');
  if (!planned) {
    let gen: number;
    try {
      gen = nextGeneration(wst);
    } catch (e) {
      if (e instanceof DevwsError) return [writeOp(c.op, block(s, e.reason, e.message))];
      throw e;
    }
    const id = effectId(c.op.metadata.uid ?? c.op.metadata.name ?? '', 'sandbox_ensure', c.ws.metadata.name ?? '', gen);
    const e = { id, kind: 'sandbox_ensure' as const, workspace: c.ws.metadata.name, generation: gen };
    const s2 = planEffect(s, { ...e, ...c.substrate.planFields(c.now) }, c.epoch);
    const ws2 = namingSandbox(c, wst, id, gen);
    return [...both(c, s2, ws2), ...c.substrate.ensure(c.ws, id, sandboxOptions(gen), undefined)];
  }
  const v = c.substrate.sandbox(planned.id);
  if (!v) {
    const gen = planned.generation ?? 0;
    const create = gated(c, s, planned, () => c.substrate.ensure(c.ws, planned.id, sandboxOptions(gen), planned));
    // The Workspace write of the plan was lost (the host died after the Operation write): name the
    // sandbox first. Its Node reads the Workspace when it starts and, seeing another generation or
    // sandbox, takes itself for stale and never reports: the node step would wait for good.
    if (wst.sandbox?.id === planned.id) return create;
    return [writeWs(c.ws, { ...namingSandbox(c, wst, planned.id, gen), operation: opRef(c, s) }), BARRIER, ...create];
  }
  const nodeId = v.nodeId ?? '';
  const s2 = recordEffect(s, planned.id, { externalId: v.externalId, outcome: 'succeeded', nodeId }, c.epoch);
  return both(c, advance(s2, endsReady(c)), plannedSandbox(wst, planned, nodeId));
}

/**
 * A create of a planned effect, when the substrate allows one now (never read from a timeout:
 * OpenSandbox waits until a create sent earlier has had time to land, then writes a new sentAt).
 */
export function gated(c: OpCtx, s: OperationStatus, planned: Effect, calls: () => FnOp[]): FnOp[] {
  const gate = c.substrate.createGate(planned, c.now);
  if (gate === 'renew') return [writeOp(c.op, markSent(s, planned.id, c.now))];
  return [...(gate === 'send' ? calls() : []), requeue(2000)];
}

/**
 * The Workspace with the planned sandbox recorded. The planned effect is the durable intent: when
 * the Workspace write that recorded it was lost (the host died between the Operation write and
 * the Workspace write), the Workspace still names the previous, terminated sandbox and is rebuilt
 * from the effect; otherwise the Node step would wait for a sandbox that is gone.
 */
function plannedSandbox(wst: WorkspaceStatus, planned: Effect, nodeId: string): WorkspaceStatus {
  if (wst.sandbox?.id === planned.id) return { ...wst, sandbox: { ...wst.sandbox, nodeId } };
  const generation = planned.generation ?? 0;
  return { ...wst, runtimeGeneration: generation, sandbox: { id: planned.id, generation, nodeId }, node: undefined };
}

/**
 * The Workspace's live sandbox with the nodeId its succeeded sandbox_ensure effect recorded, when
 * the Workspace lacks it: the sandbox step's advance writes the Operation (step node) and then the
 * Workspace (the nodeId), and that second write can be lost (a 409 against the Node's first
 * report, or the host dying in between). Without the nodeId no Node is live and the node step
 * would wait for good; the Operation's effect is the evidence.
 */
export function withEnsureEvidence(wst: WorkspaceStatus, s: OperationStatus | undefined): WorkspaceStatus {
  const sb = wst.sandbox;
  if (!sb || sb.nodeId) return wst;
  const e = (s?.effects ?? []).find(
    (x) => x.kind === 'sandbox_ensure' && x.id === sb.id && x.outcome === 'succeeded' && x.nodeId,
  );
  return e?.nodeId ? { ...wst, sandbox: { ...sb, nodeId: e.nodeId } } : wst;
}

/**
 * Node registration and heartbeat from the Node's own report (lib/devws/node-report.ts), read
 * through the generation fence, while the sandbox Pod of the current generation runs.
 */
export function observeNode(c: Ctx): WorkspaceStatus | undefined {
  const wst = withEnsureEvidence(c.ws.status ?? {}, c.op.status);
  const sb = wst.sandbox;
  if (!sb || sb.terminated) return undefined;
  if (!c.substrate.sandbox(sb.id)?.ready) return undefined;
  const r = currentNodeReport(wst, c.ws.metadata.annotations);
  return r ? nodeFromReport(wst, r, c.now) : undefined;
}

export function stepNode(c: Ctx, s: OperationStatus): FnOp[] {
  const ws2 = observeNode(c);
  if (!ws2 || !nodeIsLive(ws2, c.now)) return [requeue(1000)];
  const s2 = advance(s, endsReady(c));
  const ref = c.project.spec.repository.defaultBranch;
  return both(c, s2, { ...ws2, requestedRef: ref, workspaceBranch: workspaceBranch(c.ws.metadata.name ?? '', ref) });
}

/** The Node's result of the current clone dispatch (this operation, this attempt), if any. */
function cloneReport(c: Ctx, attempt: number): CloneResult | undefined {
  const r = currentNodeReport(c.ws.status ?? {}, c.ws.metadata.annotations)?.clone;
  if (!r || r.operation !== c.op.metadata.name || r.attempt !== attempt) return undefined;
  if (r.result === 'succeeded') return r.commit ? { kind: 'succeeded', commit: r.commit } : undefined;
  if (r.result === 'failed') return { kind: 'failed', ...(r.message ? { message: r.message } : {}) };
  return { kind: r.result };
}

/**
 * The CA the Node trusts for the Git Server goes with the clone, read from the configuration when
 * the clone is dispatched, not baked into the sandbox when it was created (a CA configured or
 * rotated after that failed every clone attempt of the sandbox; ADR 0036).
 */
function withGitServerCA(s: OperationStatus, c: Ctx): OperationStatus {
  return s.cloneInput && c.gitServerCA ? { ...s, gitServerCA: c.gitServerCA } : s;
}

export function stepClone(c: Ctx, s: OperationStatus): FnOp[] {
  if (!s.cloneInput) {
    const branch = workspaceBranch(c.ws.metadata.name ?? '', c.project.spec.repository.defaultBranch);
    return [writeOp(c.op, withGitServerCA(freezeCloneInput(s, c.project, branch, c.gitServer, c.now).status, c))];
  }
  // A CA configured (or rotated) since: the Node's next attempt trusts it.
  if (c.gitServerCA && c.gitServerCA !== s.gitServerCA) return [writeOp(c.op, { ...s, gitServerCA: c.gitServerCA })];
  const report = cloneReport(c, s.cloneAttempts ?? 0);
  return report ? applyClone(c, s, report) : [requeue(2000)];
}

/**
 * An operation blocked clone_result_unknown is never dispatched again, but the original
 * execution's definite result, arriving late for the same attempt, continues it (seed 002: success
 * makes it claimable again, failure keeps the attempt count and backoff). Undefined: nothing came.
 */
export function lateCloneResult(c: Ctx, s: OperationStatus): FnOp[] | undefined {
  if (s.state !== 'blocked' || s.step !== 'clone' || !s.cloneUnknown) return undefined;
  const report = cloneReport(c, s.cloneAttempts ?? 0);
  return report && report.kind !== 'unknown' ? applyClone(c, s, report) : undefined;
}

/** Records a clone result: the Workspace's commit (or unavailable) and the Operation's next state. */
function applyClone(c: Ctx, s: OperationStatus, report: CloneResult): FnOp[] {
  const wst = c.ws.status ?? {};
  try {
    const out = applyCloneResult(s, report, c.now);
    const ws2: WorkspaceStatus = out.workspaceUnavailable
      ? { ...wst, observedState: 'unavailable', admissionOpen: false }
      : { ...wst, baseCommitId: out.baseCommitId ?? wst.baseCommitId };
    // The clone's commit goes to the Workspace before the Operation moves on: were the Operation
    // written first and the Workspace write lost (a 409 against the Node's next report), the
    // Workspace would become ready without baseCommitId, for good.
    return out.baseCommitId ? workspaceFirst(c, out.status, ws2) : both(c, out.status, ws2);
  } catch (e) {
    if (e instanceof DevwsError) return [requeue(2000)]; // base_commit_mismatch: not recorded
    throw e;
  }
}

/** The Node's plugin results for this operation, from a report of the current generation only. */
function pluginReport(c: Ctx): NonNullable<ReturnType<typeof currentNodeReport>>['plugins'] {
  const r = currentNodeReport(c.ws.status ?? {}, c.ws.metadata.annotations)?.plugins;
  return r?.operation === c.op.metadata.name ? r : undefined;
}

/**
 * install_plugin and remove_plugin run on a ready Workspace, which stays ready meanwhile: a Node
 * that disconnects (sandbox not Ready, heartbeat older than 30 s) makes it unavailable and closes
 * admission as between operations (core.ts nodeHealth restores it once the operation is over).
 */
function nodeGoneWhileReady(c: Ctx): FnOp | undefined {
  const wst = c.ws.status ?? {};
  if (endsReady(c) || wst.observedState !== 'ready') return undefined;
  const live = observeNode(c);
  return live && nodeIsLive(live, c.now) ? undefined : writeWs(c.ws, nodeDisconnected(wst));
}

/**
 * The plugin step: freeze the plugin set once (the Node executes it, one execution ID per item),
 * record the Node's results as they come, and advance once every item has one; the Workspace's
 * plugin instances change in the same write as the advance (a failed item is recorded there and
 * does not block readiness).
 */
export function stepPlugin(c: Ctx, s: OperationStatus): FnOp[] {
  // The Workspace names the operation in the same round: the Node follows its current operation.
  if (!s.plugins) return both(c, freezePlugins(s, c.op, c.ws), c.ws.status ?? {});
  let s2: OperationStatus;
  try {
    s2 = recordPluginResults(s, pluginReport(c)?.results ?? []);
  } catch (e) {
    if (e instanceof DevwsError) return [requeue(2000)]; // plugin_result_conflict: not recorded
    throw e;
  }
  if (!pluginsDone(s2)) {
    const gone = nodeGoneWhileReady(c);
    if (gone) return [...(s2 === s ? [] : [writeOp(c.op, s2), BARRIER]), gone, requeue(1000)];
    return s2 === s ? [requeue(1000)] : [writeOp(c.op, s2), requeue(1000)];
  }
  const wst = c.ws.status ?? {};
  const plugins = pluginInstancesAfter(wst, s2, c.op.metadata.name ?? '');
  return both(c, advance(s2, endsReady(c)), { ...wst, plugins });
}

export function stepDone(c: Ctx, s: OperationStatus): FnOp[] {
  const ws2 = observeNode(c) ?? c.ws.status ?? {};
  if (!nodeIsLive(ws2, c.now)) return [requeue(1000)];
  const ready = commitReady(ws2, c.op, c.now);
  // The Workspace write is the commit point; the Operation mirrors it.
  return [writeWs(c.ws, ready), BARRIER, writeOp(c.op, { ...s, state: 'succeeded' })];
}

/** The Node's idle proof, only from a report of the current generation (an older one is stale_node). */
function idleReport(c: Ctx): WorkspaceStatus['idleProof'] {
  return currentNodeReport(c.ws.status ?? {}, c.ws.metadata.annotations)?.idle;
}

export function stepQuiesce(c: Ctx, s: OperationStatus): FnOp[] {
  const wst = c.ws.status ?? {};
  if (!s.workspaceBefore) {
    const q = beginQuiesce(wst, s, 0);
    return q.workspace ? both(c, q.operation, q.workspace) : [writeOp(c.op, q.operation)];
  }
  const ws2 = { ...(observeNode(c) ?? wst), idleProof: idleReport(c) ?? wst.idleProof };
  const d = decideQuiesce(ws2, s, c.now);
  if (d.kind === 'wait') {
    // Persist only a new idle report (fenced by epoch in decideQuiesce); the heartbeat is re-observed each time.
    const changed = !sameJson(ws2.idleProof, wst.idleProof);
    return changed ? [writeWs(c.ws, ws2), requeue(2000)] : [requeue(2000)];
  }
  if (d.kind === 'refused') return both(c, d.operation, d.workspace);
  return both(c, d.operation, ws2);
}

export function stepTerminate(c: Ctx, s: OperationStatus): FnOp[] {
  const wst = c.ws.status ?? {};
  const sb = wst.sandbox;
  if (!sb || sb.terminated) return finishOrAdvance(c, advance(s, endsReady(c)), wst);
  const id = effectId(
    c.op.metadata.uid ?? c.op.metadata.name ?? '',
    'sandbox_terminate',
    c.ws.metadata.name ?? '',
    sb.generation,
  );
  const planned = planEffect(
    s,
    { id, kind: 'sandbox_terminate', workspace: c.ws.metadata.name, generation: sb.generation },
    c.epoch,
  );
  if (planned !== s) return [writeOp(c.op, planned)];
  const v = c.substrate.sandbox(sb.id);
  if (v && !v.terminated) return [...c.substrate.terminate(v), requeue(2000)];
  const s2 = recordEffect(s, id, { externalId: sb.id, outcome: 'succeeded', terminated: true }, c.epoch);
  return finishOrAdvance(c, advance(s2, endsReady(c)), {
    ...wst,
    sandbox: { ...sb, terminated: true },
    node: undefined,
  });
}

export function stepCleanup(c: Ctx, s: OperationStatus): FnOp[] {
  const wst = c.ws.status ?? {};
  const id = effectId(
    c.op.metadata.uid ?? c.op.metadata.name ?? '',
    'workspace_data_delete',
    c.ws.metadata.name ?? '',
    wst.runtimeGeneration ?? 0,
  );
  const e = { id, kind: 'workspace_data_delete' as const, workspace: c.ws.metadata.name };
  const planned = planEffect(s, { ...e, ...c.substrate.planFields(c.now) }, c.epoch);
  if (planned !== s) return [writeOp(c.op, planned)];
  const recorded = findEffect(s, id);
  if (recorded && c.substrate.hasData(c.ws, recorded))
    return gated(c, s, recorded, () => c.substrate.deleteData(c.ws, recorded));
  const s2 = recordEffect(s, id, { externalId: id, outcome: 'succeeded', removed: true }, c.epoch);
  return finishOrAdvance(c, advance(s2), wst);
}

/** After an advance: a finished operation leaves the Workspace in its after-success state. */
function finishOrAdvance(c: Ctx, s: OperationStatus, ws: WorkspaceStatus): FnOp[] {
  if (s.state !== 'succeeded') return both(c, s, ws);
  return both(c, s, {
    ...ws,
    observedState: observedAfterSuccess(c.op.spec.kind) ?? ws.observedState,
    admissionOpen: false,
  });
}
