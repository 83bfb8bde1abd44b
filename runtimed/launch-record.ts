/**
 * The launch record: just before an attempt's execution starts, runtimed leaves a marker file
 * in the Run directory; after a restart, a Run whose execution the Runtime Server no longer has
 * is resumed by what that record says (fence.ts resumeDecision): launched means it ran and its
 * result is lost (ExecutionLost), never run again in the same attempt.
 */
import { constants } from 'node:fs';
import { lstat } from 'node:fs/promises';
import { closeFd, drive, op } from './artifacts/fs-ops.ts';
import { currentAttempt } from '../lib/run/retry.ts';
import { openDirBeneath, type DirHandle } from './artifacts/safe-dir.ts';
import { resumeDecision, type Resume } from './fence.ts';
import type { Run } from './types.ts';

const LAUNCHED = '.kruntimes-launched-';

/** A Run an earlier runtimed launched whose execution the Runtime Server no longer has. */
export class LostExecution extends Error {
  constructor() {
    super('runtime execution not found after runtimed restart: it had started, and is not run again');
  }
}

/** Records in the Run directory that this attempt is launched (resumeDecision reads it after a restart). */
export async function markLaunched(dir: DirHandle, attempt: number): Promise<void> {
  // O_NONBLOCK: a FIFO an earlier attempt left under this name fails the open (ENXIO) instead of
  // holding it, and with it runtimed's event loop (the open is synchronous, fs-ops.ts).
  const flags =
    constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW | constants.O_NONBLOCK;
  closeFd(await drive(op.open(`${dir.path}/${LAUNCHED}${attempt}`, flags, 0o600)));
}

/** Whether markLaunched ran for this attempt in the Run directory (closes the handle). */
async function wasLaunched(dir: DirHandle | undefined, attempt: number): Promise<boolean> {
  if (!dir) return false;
  try {
    return !!(await lstat(`${dir.path}/${LAUNCHED}${attempt}`).catch(() => undefined));
  } finally {
    await dir.close().catch(() => undefined);
  }
}

export interface ResumeContext {
  /** When this runtimed started (ms): only Runs created before it can have been launched by another. */
  bornAt: number;
  /** This runtimed dropped the Run after its handling failed (Runner.retake): it may have launched it. */
  retaken?: boolean;
  /** Whether the Runtime Server has an execution for this Run UID. */
  hasExecution(uid: string): Promise<boolean>;
  workspaceRoot: string | DirHandle;
  /** The Run directory below workspaceRoot, as path segments. */
  runDirSegments: string[];
}

/** After a restart (or a retake): adopt the Runtime Server's execution, fail a Run that ran but is
 * not there, or launch. */
export async function resumeRun(c: ResumeContext, run: Run): Promise<Resume> {
  const createdBeforeStart = c.retaken === true || Date.parse(run.metadata.creationTimestamp ?? '') <= c.bornAt;
  if (!createdBeforeStart) return 'launch';
  const serverHasIt = await c.hasExecution(run.metadata.uid ?? '');
  const launched =
    !serverHasIt &&
    (await openDirBeneath(c.workspaceRoot, c.runDirSegments).then(
      (dir) => wasLaunched(dir, currentAttempt(run.status?.attempt)),
      // An unsafe Run directory (a link the Run planted) is reported by the launch (UnsafePath).
      () => false,
    ));
  return resumeDecision({ createdBeforeStart, serverHasIt, launched });
}
