/**
 * What happens when an execution ends: failure classification, and on success the outputs
 * file and the artifacts (validated, uploaded to the Runtime's ArtifactStore) that make up the
 * terminal status.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { removeBeneath, type DirHandle } from './artifacts/safe-dir.ts';
import type { Summary } from './runtime-server/executions.ts';
import { readOutputsFile } from './outputs.ts';
import type { Run } from './types.ts';

export type Collected =
  | { ok: true; outputs: Record<string, string> | undefined; artifactRefs: unknown[] | undefined }
  | { ok: false; transient?: boolean; reason: string; message: string };

export interface Finisher {
  /** The Runtime's artifact store, when it has one (artifact inputs are staged from it, cleanup deletes from it). */
  readonly store?: import('./artifacts/store.ts').ArtifactStore;
  /**
   * Recreates the Run's artifact staging directory below the open Run directory `dir` when the
   * Runtime has a store; returns its path as the Run sees it (below `runDir`).
   */
  prepareArtifactsDir(run: Run, dir: DirHandle, runDir: string): Promise<string | undefined>;
  /** dir: the open Run-local directory holding outputs and artifacts (never resolved through a link). */
  collect(run: Run, dir: DirHandle): Promise<Collected>;
}

const PREPARE_MESSAGES = ['no args or script provided', 'no script or args provided'];

/** Why an execution was fenced (its lease lapsed: runtimed could not reach the API server in time). */
export const FENCED_MESSAGE =
  'runtimed could not renew its execution lease (no accepted heartbeat within the lease), so the execution was stopped';

/** The message of an execution its Runtime Server killed because the server itself stopped. */
export const SHUTDOWN_MESSAGE = 'the runtime container stopped while the execution ran';

/** Whether the Runtime Server killed the execution because it stopped (its container stops). */
export function isShutdownKill(s: Summary): boolean {
  return s.errorMessage === 'shutdown' && s.exitCode === -1;
}

export function classifyFailure(s: Summary, stderrTail = ''): { reason: string; message: string } {
  if (s.errorMessage === 'timeout' && s.exitCode === -1) return { reason: 'Timeout', message: 'timeout' };
  if (s.errorMessage === 'fenced' && s.exitCode === -1) return { reason: 'Fenced', message: FENCED_MESSAGE };
  if (isShutdownKill(s)) return { reason: 'ExecutionLost', message: SHUTDOWN_MESSAGE };
  if (PREPARE_MESSAGES.includes(s.errorMessage))
    return { reason: 'PrepareSource', message: `prepare source: ${s.errorMessage}` };
  const base = s.errorMessage || `exit status ${s.exitCode}`;
  return { reason: 'RuntimeError', message: stderrTail ? `${base}; runtime stderr: ${stderrTail}` : base };
}

/** Outputs only; artifacts are added by ArtifactFinisher when the Runtime has a store. */
export class OutputsFinisher implements Finisher {
  constructor(protected readonly workspaceRoot: string) {}

  prepareArtifactsDir(_run: Run, _dir: DirHandle, _runDir: string): Promise<string | undefined> {
    return Promise.resolve(undefined);
  }

  async collect(_run: Run, dir: DirHandle): Promise<Collected> {
    const out = await readOutputsFile(`${dir.path}/outputs`);
    if (!out.ok) return { ok: false, reason: out.reason, message: out.message };
    return { ok: true, outputs: out.outputs, artifactRefs: undefined };
  }

  /** Removes and recreates `name` below `dir` (never through a link); returns `shown/name`. */
  protected async recreate(dir: DirHandle, name: string, shown: string): Promise<string> {
    await removeBeneath(dir, [name]);
    await mkdir(`${dir.path}/${name}`, { mode: 0o770 });
    return join(shown, name);
  }
}
