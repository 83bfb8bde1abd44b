/**
 * Pure RuntimePodLocal PersistentWorkspace lifecycle (seed 000): binding by a stable hash of the
 * workspace UID over ready Runtime Pods sorted by name, UID-fenced Bound, Lost (never rebound)
 * when the bound Pod is gone or replaced, lastUsedTime set once when the last active Run ends,
 * Released before deletion (a Released workspace without a deletionTimestamp gets its deletion
 * requested), and the finalizer protocol (runtimed removes it after deleting the
 * directory; the controller removes it only for Lost workspaces).
 */
import { createHash } from 'node:crypto';
import { setCondition, type Condition } from '../../lib/run/conditions.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { sameJson } from '../../lib/kube/same-json.ts';

export const WORKSPACE_FINALIZER = 'kruntimes.io/workspace-cleanup';
export type Phase = 'Pending' | 'Bound' | 'Lost' | 'Released';

export interface WorkspaceStatus {
  phase?: Phase;
  runtime?: string;
  boundPod?: string;
  boundPodUID?: string;
  path?: string;
  lastUsedTime?: string;
  conditions?: Condition[];
}
export interface Workspace extends KubeObject {
  spec: { runtime: string; mode?: string; ttlSecondsAfterUnused?: number; cleanupPolicy?: 'DeleteAfterTTL' | 'Retain' };
  status?: WorkspaceStatus;
}
export interface PodView {
  name: string;
  uid: string;
  ready: boolean;
  deleting: boolean;
  phase: string;
}

export type Decision =
  | { kind: 'status'; status: WorkspaceStatus }
  /** Bind a workspace that has no finalizer yet: the finalizer first, then the Bound status, in one
   * invocation (no watch round trip between them; issue 17). */
  | { kind: 'finalizeAndBind'; status: WorkspaceStatus }
  | { kind: 'addFinalizer' }
  | { kind: 'removeFinalizer'; reason: string }
  /** Released (cleanup requested) but not yet deleted: request the Kubernetes deletion (seed order: Released first). */
  | { kind: 'delete' }
  | { kind: 'none' };

export function pathFor(name: string): string {
  return `/workspace/persistent/${name}`;
}

/** Index into the name-sorted ready Pods chosen by a stable hash of the workspace UID. */
export function choosePod(uid: string, ready: PodView[]): PodView | undefined {
  if (!ready.length) return undefined;
  const sorted = [...ready].sort((a, b) => a.name.localeCompare(b.name));
  const h = createHash('sha256').update(uid).digest();
  return sorted[h.readUInt32BE(0) % sorted.length];
}

interface CondSpec {
  type: string;
  ok: boolean;
  reason: string;
  message: string;
}
const condOf = (s: WorkspaceStatus, c: CondSpec, now: string, gen?: number): Condition[] =>
  setCondition(
    s.conditions,
    {
      type: c.type,
      status: c.ok ? 'True' : 'False',
      reason: c.reason,
      message: c.message,
      ...(gen ? { observedGeneration: gen } : {}),
    },
    now,
  );

function bind(ws: Workspace, pods: PodView[], now: string): WorkspaceStatus {
  const s = ws.status ?? {};
  const ready = pods.filter((p) => p.ready && !p.deleting && p.phase === 'Running');
  const pod = choosePod(ws.metadata.uid ?? '', ready);
  const gen = ws.metadata.generation;
  if (!pod)
    return {
      ...s,
      phase: 'Pending',
      runtime: ws.spec.runtime,
      conditions: condOf(
        s,
        {
          type: 'Bound',
          ok: false,
          reason: 'NoReadyRuntimePods',
          message: `waiting for a ready Runtime Pod of runtime "${ws.spec.runtime}"`,
        },
        now,
        gen,
      ),
    };
  const next: WorkspaceStatus = {
    ...s,
    phase: 'Bound',
    runtime: ws.spec.runtime,
    boundPod: pod.name,
    boundPodUID: pod.uid,
    path: pathFor(ws.metadata.name ?? ''),
    conditions: condOf(
      s,
      { type: 'Bound', ok: true, reason: 'Bound', message: `bound to Runtime Pod ${pod.name}` },
      now,
      gen,
    ),
  };
  // The Pod was chosen among ready ones: say so in the same write (not one write later).
  return { ...next, conditions: condOf(next, podAvailable(pod), now) };
}

/** The PodAvailable condition for the bound Pod. */
function podAvailable(pod: PodView | undefined): CondSpec {
  const ready = !!pod?.ready;
  return {
    type: 'PodAvailable',
    ok: ready,
    reason: ready ? 'PodReady' : 'PodNotReady',
    message: ready
      ? `Runtime Pod ${pod?.name} is ready`
      : `Runtime Pod ${pod?.name} is not ready; Runs using the workspace wait`,
  };
}

function lost(ws: Workspace, why: string, now: string): WorkspaceStatus {
  const s = ws.status ?? {};
  return {
    ...s,
    phase: 'Lost',
    conditions: condOf(
      s,
      {
        type: 'Bound',
        ok: false,
        reason: 'PodLost',
        message: `${why}; the workspace data is gone and it is never rebound (create a new workspace)`,
      },
      now,
      ws.metadata.generation,
    ),
  };
}

/** lastUsedTime: cleared while Runs use the workspace, set once when it becomes unused. */
function usage(s: WorkspaceStatus, activeRuns: number, now: string): WorkspaceStatus {
  if (activeRuns > 0) {
    const { lastUsedTime: _l, ...rest } = s;
    return rest;
  }
  return s.lastUsedTime ? s : { ...s, lastUsedTime: now };
}

const changed = (next: WorkspaceStatus, s: WorkspaceStatus): Decision =>
  sameJson(next, s) ? { kind: 'none' } : { kind: 'status', status: next };

/** Bound (or Released) workspaces whose Pod is gone or replaced become Lost. */
function fence(ws: Workspace, pods: PodView[], nowIso: string): { decision?: Decision; pod?: PodView } {
  const s = ws.status ?? {};
  if (s.phase !== 'Bound' && s.phase !== 'Released') return {};
  const pod = pods.find((p) => p.name === s.boundPod);
  if (!pod)
    return {
      decision: { kind: 'status', status: lost(ws, `bound Runtime Pod ${s.boundPod} no longer exists`, nowIso) },
    };
  if (s.boundPodUID && pod.uid !== s.boundPodUID)
    return {
      decision: {
        kind: 'status',
        status: lost(ws, `Runtime Pod ${s.boundPod} was replaced (UID ${pod.uid}, bound to ${s.boundPodUID})`, nowIso),
      },
    };
  return { pod };
}

/** Why cleanup was requested: an explicit deletion, or the unused TTL of the sweep. */
export type ReleaseReason = 'Deleting' | 'TTLExpired';

/**
 * The Released status a cleanup request writes before the Kubernetes deletion (seed 000 cleanup
 * protocol step 3): terminal for scheduling, kept until runtimed on the bound Pod deleted the directory.
 */
export function released(ws: Workspace, reason: ReleaseReason, nowIso: string): WorkspaceStatus {
  const s = ws.status ?? {};
  const why =
    reason === 'TTLExpired'
      ? `unused for ttlSecondsAfterUnused (${ws.spec.ttlSecondsAfterUnused}s)`
      : 'the workspace is being deleted';
  return {
    ...s,
    phase: 'Released',
    conditions: condOf(
      s,
      {
        type: 'Released',
        ok: true,
        reason,
        message: `cleanup requested (${why}): waiting for runtimed on the bound Pod to delete the directory`,
      },
      nowIso,
    ),
  };
}

function deleting(ws: Workspace, nowIso: string): Decision {
  const s = ws.status ?? {};
  if (s.phase === 'Lost' && (ws.metadata.finalizers ?? []).includes(WORKSPACE_FINALIZER))
    return { kind: 'removeFinalizer', reason: 'the workspace is Lost: no Pod-local data remains' };
  if (s.phase === 'Bound') return { kind: 'status', status: released(ws, 'Deleting', nowIso) };
  // Never bound (its Bound status write did not follow the finalizer): no Pod holds its data.
  if ((s.phase ?? 'Pending') === 'Pending' && (ws.metadata.finalizers ?? []).includes(WORKSPACE_FINALIZER))
    return { kind: 'removeFinalizer', reason: 'the workspace was never bound: no Pod-local data exists' };
  return { kind: 'none' };
}

function boundUpkeep(ws: Workspace, pod: PodView | undefined, activeRuns: number, nowIso: string): Decision {
  const s = ws.status ?? {};
  if (!(ws.metadata.finalizers ?? []).includes(WORKSPACE_FINALIZER)) return { kind: 'addFinalizer' };
  const next = usage(s, activeRuns, nowIso);
  return changed({ ...next, conditions: condOf(next, podAvailable(pod), nowIso) }, s);
}

export function decide(ws: Workspace, pods: PodView[], activeRuns: number, now: Date): Decision {
  const nowIso = now.toISOString();
  const s = ws.status ?? {};
  const f = fence(ws, pods, nowIso);
  if (f.decision) return f.decision;
  if (ws.metadata.deletionTimestamp) return deleting(ws, nowIso);
  if (s.phase === 'Released') return { kind: 'delete' };
  if (s.phase === 'Lost') return { kind: 'none' };
  if (s.phase === 'Bound') return boundUpkeep(ws, f.pod, activeRuns, nowIso);
  const b = bind(ws, pods, nowIso);
  if (b.phase !== 'Bound') return changed(b, s);
  const status = usage(b, activeRuns, nowIso);
  if (!(ws.metadata.finalizers ?? []).includes(WORKSPACE_FINALIZER)) return { kind: 'finalizeAndBind', status };
  return changed(status, s);
}

/** When an unused DeleteAfterTTL workspace is due for cleanup, if ever. */
export function dueAt(ws: Workspace): number | undefined {
  const s = ws.status;
  if (
    ws.metadata.deletionTimestamp ||
    s?.phase !== 'Bound' ||
    (ws.spec.cleanupPolicy ?? 'DeleteAfterTTL') !== 'DeleteAfterTTL'
  )
    return undefined;
  const ttl = ws.spec.ttlSecondsAfterUnused;
  const last = Date.parse(s.lastUsedTime ?? '');
  if (ttl === undefined || ttl === null || !Number.isFinite(last)) return undefined;
  return last + ttl * 1000;
}

/** The workspace without what its usage bookkeeping and every write change. */
function withoutUsage(o: KubeObject): KubeObject {
  const {
    resourceVersion: _rv,
    managedFields: _mf,
    ...metadata
  } = o.metadata as KubeObject['metadata'] & {
    managedFields?: unknown;
  };
  const { lastUsedTime: _l, ...status } = (o as Workspace).status ?? {};
  return { ...o, metadata, status };
}

/**
 * Whether a workspace update changed only its lastUsedTime (set when its last Run ends, cleared when
 * the next starts: twice per step boundary of a job). Nobody but the TTL sweep reads it, so the
 * scheduler and the WorkflowRun controller need not be woken by it (issue 17).
 */
export function usageOnly(e: { type: 'added' | 'updated' | 'deleted'; object: KubeObject; old?: KubeObject }): boolean {
  return e.type === 'updated' && !!e.old && sameJson(withoutUsage(e.old), withoutUsage(e.object));
}
