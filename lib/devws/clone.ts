/**
 * The clone step (seed 002 "clone 步骤从 Binding 快照 clone"): the input is frozen once per
 * operation from the binding's current snapshot; no snapshot defers without consuming an attempt;
 * failures are retried after 5 s and 10 s and the third fails the operation; an unknown result is
 * never retried automatically; a late definite result continues the same operation.
 */
import { DevwsError, type CloneInput, type OperationStatus, type Project } from './api.ts';
import { advance, block, deferRetry, fail } from './operations.ts';

export const SNAPSHOT_NOT_READY_MS = 10_000;
/** Waits after the 1st and 2nd failed clone; the 3rd failure fails the operation. */
export const CLONE_BACKOFF_MS = [5_000, 10_000];

export type FreezeOutcome = { kind: 'frozen'; status: OperationStatus } | { kind: 'parked'; status: OperationStatus };

/**
 * Freezes the clone input on entering (or claiming) a clone step whose input is not frozen yet.
 * gitServerBaseUrl is the configured Git Server base (undefined: not configured).
 */
export function freezeCloneInput(
  s: OperationStatus,
  project: Project,
  workspaceBranch: string,
  gitServerBaseUrl: string | undefined,
  now: Date,
): FreezeOutcome {
  if (s.cloneInput) return { kind: 'frozen', status: s };
  if (!gitServerBaseUrl) return { kind: 'parked', status: block(s, 'git_server_unconfigured') };
  const snap = project.status?.snapshot;
  if (!snap) {
    if (project.status?.sync?.state === 'failed') {
      return { kind: 'parked', status: fail(s, 'repository_sync_failed', project.status.sync.operationId) };
    }
    return { kind: 'parked', status: deferRetry(s, 'snapshot_not_ready', now, SNAPSHOT_NOT_READY_MS) };
  }
  const input: CloneInput = {
    repositoryUrl: `${gitServerBaseUrl.replace(/\/+$/, '')}/${project.metadata.namespace ?? ''}/${project.metadata.name ?? ''}.git`,
    snapshotRef: snap.ref,
    baseCommit: snap.commit,
    workspaceBranch,
  };
  return { kind: 'frozen', status: { ...s, cloneInput: input } };
}

/** A clone execution may be dispatched only while its last result is not unknown. */
export function mayDispatchClone(s: OperationStatus): boolean {
  return s.step === 'clone' && s.state === 'running' && !!s.cloneInput && !s.cloneUnknown;
}

/** RecordDispatch must carry the frozen input unchanged (409 clone_input_conflict). */
export function assertDispatchInput(s: OperationStatus, dispatched: CloneInput): void {
  const f = s.cloneInput;
  const same =
    !!f &&
    f.repositoryUrl === dispatched.repositoryUrl &&
    f.snapshotRef === dispatched.snapshotRef &&
    f.baseCommit === dispatched.baseCommit &&
    f.workspaceBranch === dispatched.workspaceBranch;
  if (!same)
    throw new DevwsError('clone_input_conflict', 409, 'the dispatched clone input differs from the frozen one');
}

export type CloneResult =
  { kind: 'succeeded'; commit: string } | { kind: 'failed'; message?: string } | { kind: 'unknown' };

export interface CloneOutcome {
  status: OperationStatus;
  /** Set on success: the commit to write into the Workspace's baseCommitId. */
  baseCommitId?: string;
  /** Set when the operation failed: the Workspace becomes unavailable. */
  workspaceUnavailable?: boolean;
}

/**
 * Applies a clone execution's result. A success whose commit is not the frozen baseCommit is
 * 400 base_commit_mismatch and nothing is recorded. A late definite result of an execution whose
 * result was unknown continues the same operation (success: claimable again; failure: the same
 * attempt count and backoff).
 */
export function applyCloneResult(s: OperationStatus, r: CloneResult, now: Date): CloneOutcome {
  if (r.kind === 'succeeded') {
    if (r.commit !== s.cloneInput?.baseCommit) {
      throw new DevwsError(
        'base_commit_mismatch',
        400,
        `clone returned ${r.commit}, the frozen input is ${s.cloneInput?.baseCommit ?? 'unset'}`,
      );
    }
    // A late result of a parked (blocked) operation makes it claimable again; a live one runs on.
    const state = s.state === 'blocked' ? ('queued' as const) : ('running' as const);
    const cleared = { ...s, cloneUnknown: undefined, state, retryAt: undefined };
    return { status: advance(cleared, true), baseCommitId: r.commit };
  }
  if (r.kind === 'unknown') {
    return { status: { ...block(s, 'clone_result_unknown'), cloneUnknown: true } };
  }
  const attempts = (s.cloneAttempts ?? 0) + 1;
  const base = { ...s, cloneAttempts: attempts, cloneUnknown: undefined };
  const why = r.message ? `: ${r.message}` : '';
  if (attempts > CLONE_BACKOFF_MS.length) {
    return { status: fail(base, 'clone_failed', `clone failed ${attempts} times${why}`), workspaceUnavailable: true };
  }
  const delay = CLONE_BACKOFF_MS[attempts - 1] ?? 10_000;
  return { status: deferRetry(base, 'clone_failed', now, delay, `clone attempt ${attempts} failed${why}`) };
}
