/**
 * delete_project (seed 002 "删除 Project 一次关闭所有 Workspace"): one operation closes every
 * Workspace of the Project at once, proves each idle for its new admission epoch, terminates every
 * live sandbox and deletes every Workspace's data, each as an effect keyed by ID and stamped with
 * the lease epoch; then the Project goes. A Node that is not idle fails the whole operation
 * (resource_in_use): every Workspace returns to its state before and the Project to active. A
 * running repository sync holds the delete back (retry_wait repository_operation_running).
 */
import type { Operation, OperationStatus, Workspace, WorkspaceStatus } from '../../lib/devws/api.ts';
import { D } from '../../lib/devws/api.ts';
import { effectId, findEffect, planEffect, recordEffect } from '../../lib/devws/effects.ts';
import { decideQuiesce, restoreAfterRefusal } from '../../lib/devws/idle.ts';
import { advance, block, deferRetry } from '../../lib/devws/operations.ts';
import type { Operation as FnOp } from '../../lib/fn/types.ts';
import { currentNodeReport, nodeFromReport } from '../../lib/devws/node-report.ts';
import { BARRIER, gated, requeue, withTerminateEvidence, writeOp, writeWs, type OpCtx } from './steps.ts';

/** The seed's wait before a delete held back by a repository operation is claimed again. */
export const REPOSITORY_OPERATION_RUNNING_MS = 10_000;

export interface ProjectCtx extends OpCtx {
  /** Every Workspace whose spec.project names the Project. */
  workspaces: Workspace[];
}

type Before = NonNullable<OperationStatus['workspacesBefore']>[number];
interface Member {
  ws: Workspace;
  before: Before;
}

const nameOf = (w: Workspace): string => w.metadata.name ?? '';
const nsOf = (c: OpCtx): string => c.op.metadata.namespace ?? '';
const opRef = (op: Operation, s: OperationStatus): WorkspaceStatus['operation'] => ({
  name: op.metadata.name ?? '',
  state: s.state,
  step: s.step,
});

/** The delete of a Project whose repository sync is still running waits (no attempt is counted). */
export function syncHold(c: OpCtx, claimed: OperationStatus): OperationStatus | undefined {
  if (c.op.spec.kind !== 'delete_project' || c.project.status?.sync?.state !== 'running') return undefined;
  return deferRetry(claimed, 'repository_operation_running', c.now, REPOSITORY_OPERATION_RUNNING_MS);
}

/** The Workspaces the operation closed (frozen on entering quiesce), as observed now. */
function members(c: ProjectCtx, s: OperationStatus): Member[] {
  const out: Member[] = [];
  for (const before of s.workspacesBefore ?? []) {
    const ws = c.workspaces.find((w) => nameOf(w) === before.workspace);
    if (ws) out.push({ ws, before });
  }
  return out;
}

function lifecycleDeleting(c: OpCtx): FnOp[] {
  const p = c.project;
  if (p.status?.lifecycle === 'deleting') return [];
  return [{ op: 'status', resource: D.projects, object: { ...p, status: { ...p.status, lifecycle: 'deleting' } } }];
}

/** Admission closed at the epoch the operation recorded for this Workspace (the Node then proves idleness). */
function closed(c: OpCtx, s: OperationStatus, ws: WorkspaceStatus, epoch: number): WorkspaceStatus {
  const live = !!ws.sandbox && !ws.sandbox.terminated;
  return {
    ...ws,
    admissionOpen: false,
    admissionEpoch: epoch,
    observedState: live ? 'stopping' : ws.observedState,
    operation: opRef(c.op, s),
  };
}

/**
 * Entering quiesce: the Operation records every Workspace with its state before and the epoch its
 * close bumps to (the durable intent), then every Workspace closes admission in its own write.
 */
function closeAll(c: ProjectCtx, s: OperationStatus): FnOp[] {
  const ws = c.workspaces.filter((w) => w.status?.observedState !== 'deleted');
  const before: Before[] = ws.map((w) => ({
    workspace: nameOf(w),
    ...(w.status?.observedState ? { observedState: w.status.observedState } : {}),
    admissionEpoch: (w.status?.admissionEpoch ?? 0) + 1,
  }));
  const s2 = { ...s, workspacesBefore: before };
  const writes = ws.map((w, i) => writeWs(w, closed(c, s2, w.status ?? {}, before[i]?.admissionEpoch ?? 0)));
  return [writeOp(c.op, s2), BARRIER, ...writes, ...lifecycleDeleting(c)];
}

/** The Workspace with its Node and idle proof read from the Node's fenced report. */
function observed(c: OpCtx, ws: Workspace): WorkspaceStatus {
  const st = ws.status ?? {};
  const sb = st.sandbox;
  if (!sb || sb.terminated || !c.substrate.sandbox(sb.id)?.ready) return st;
  const r = currentNodeReport(st, ws.metadata.annotations);
  if (!r) return st;
  return { ...nodeFromReport(st, r, c.now), idleProof: r.idle ?? st.idleProof };
}

export function deleteQuiesce(c: ProjectCtx, s: OperationStatus): FnOp[] {
  if (!s.workspacesBefore) return closeAll(c, s);
  const m = members(c, s);
  // A close whose Workspace write was lost is written again, at the recorded epoch.
  const open = m.filter(({ ws, before }) => (ws.status?.admissionEpoch ?? 0) < before.admissionEpoch);
  if (open.length > 0) {
    return [
      ...open.map(({ ws, before }) => writeWs(ws, closed(c, s, ws.status ?? {}, before.admissionEpoch))),
      requeue(1000),
    ];
  }
  const decisions = m.map(({ ws }) => decideQuiesce(observed(c, ws), s, c.now));
  const refused = decisions.find((d) => d.kind === 'refused');
  if (refused?.kind === 'refused') {
    const restore = m.map(({ ws, before }) =>
      writeWs(ws, {
        ...restoreAfterRefusal(ws.status ?? {}, before.observedState),
        operation: opRef(c.op, refused.operation),
      }),
    );
    return [...restore, BARRIER, writeOp(c.op, refused.operation)];
  }
  if (decisions.some((d) => d.kind === 'wait')) return [...lifecycleDeleting(c), requeue(2000)];
  return [writeOp(c.op, advance(s))];
}

export function deleteTerminate(c: ProjectCtx, s: OperationStatus): FnOp[] {
  const uid = c.op.metadata.uid ?? c.op.metadata.name ?? '';
  const live = members(c, s).flatMap(({ ws }) => {
    const sb = withTerminateEvidence(ws.status ?? {}, s).sandbox;
    if (!sb || sb.terminated) return [];
    return [{ ws, sb, id: effectId(uid, 'sandbox_terminate', nameOf(ws), sb.generation) }];
  });
  let planned = s;
  for (const x of live) {
    const e = { id: x.id, kind: 'sandbox_terminate' as const, workspace: nameOf(x.ws), generation: x.sb.generation };
    planned = planEffect(planned, e, c.epoch);
  }
  if (planned !== s) return [writeOp(c.op, planned)];
  const pods = live.flatMap((x) => {
    const v = c.substrate.sandbox(x.sb.id);
    return v && !v.terminated ? c.substrate.terminate(v) : [];
  });
  if (pods.length > 0) return [...pods, requeue(2000)];
  let s2 = s;
  for (const x of live) {
    s2 = recordEffect(s2, x.id, { externalId: x.sb.id, outcome: 'succeeded', terminated: true }, c.epoch);
  }
  const next = advance(s2);
  const ws = live.map((x) =>
    writeWs(x.ws, {
      ...(x.ws.status ?? {}),
      sandbox: { ...x.sb, terminated: true },
      node: undefined,
      operation: opRef(c.op, next),
    }),
  );
  return [writeOp(c.op, next), BARRIER, ...ws];
}

/** Every Workspace's data is deleted (workspace_data_delete, removed=true); then the operation succeeds. */
export function deleteCleanup(c: ProjectCtx, s: OperationStatus): FnOp[] {
  const m = members(c, s);
  const live = m.find(({ ws }) => {
    const sb = withTerminateEvidence(ws.status ?? {}, s).sandbox;
    return !!sb && !sb.terminated;
  });
  if (live)
    return [writeOp(c.op, block(s, 'sandbox_not_terminated', `Workspace ${nameOf(live.ws)} has a live sandbox`))];
  const uid = c.op.metadata.uid ?? c.op.metadata.name ?? '';
  const ids = m.map(({ ws }) => effectId(uid, 'workspace_data_delete', nameOf(ws), ws.status?.runtimeGeneration ?? 0));
  let planned = s;
  m.forEach(({ ws }, i) => {
    const e = { id: ids[i] ?? '', kind: 'workspace_data_delete' as const, workspace: nameOf(ws) };
    planned = planEffect(planned, { ...e, ...c.substrate.planFields(c.now) }, c.epoch);
  });
  if (planned !== s) return [writeOp(c.op, planned)];
  const present = m.flatMap(({ ws }, i) => {
    const e = findEffect(s, ids[i] ?? '');
    return e && c.substrate.hasData(ws, e) ? [{ ws, e }] : [];
  });
  // One Workspace at a time: a renewed create intent is one Operation write.
  const first = present[0];
  if (first) return gated(c, s, first.e, () => present.flatMap(({ ws, e }) => c.substrate.deleteData(ws, e)));
  let s2 = s;
  for (const id of ids) s2 = recordEffect(s2, id, { externalId: id, outcome: 'succeeded', removed: true }, c.epoch);
  const done = advance(s2);
  const ws = m.map(({ ws }) =>
    writeWs(ws, {
      ...withTerminateEvidence(ws.status ?? {}, s),
      observedState: 'deleted',
      admissionOpen: false,
      operation: opRef(c.op, done),
    }),
  );
  // The Workspaces are written first: a finished Operation always has its Workspace outcome.
  return [...ws, BARRIER, writeOp(c.op, done)];
}

/**
 * After delete_project succeeded: the Project is recorded deleted, then it and its Workspaces go
 * (the main Workspace and create Operation are also owned by it). The Operation stays, as the record.
 */
export function projectGone(c: OpCtx, workspaces: Workspace[]): FnOp[] {
  const p = c.project;
  const mark: FnOp[] =
    p.status?.lifecycle === 'deleted'
      ? []
      : [
          { op: 'status', resource: D.projects, object: { ...p, status: { ...p.status, lifecycle: 'deleted' } } },
          BARRIER,
        ];
  const ns = nsOf(c);
  const ws: FnOp[] = workspaces.map((w) => ({
    op: 'delete',
    resource: D.workspaces,
    namespace: ns,
    name: nameOf(w),
    uid: w.metadata.uid,
  }));
  return [
    ...mark,
    ...ws,
    { op: 'delete', resource: D.projects, namespace: ns, name: p.metadata.name ?? '', uid: p.metadata.uid },
  ];
}
