/**
 * What happens when an execution ends: failure classification, and on success the outputs
 * file and the artifacts (validated, uploaded to the Runtime's ArtifactStore) that make up the
 * terminal status.
 */
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Summary } from './runtime-server/executions.ts';
import { readOutputsFile } from './outputs.ts';
import type { Run } from './types.ts';

export type Collected =
  | { ok: true; outputs: Record<string, string> | undefined; artifactRefs: unknown[] | undefined }
  | { ok: false; transient?: boolean; reason: string; message: string };

export interface Finisher {
  /** The Runtime's artifact store, when it has one (artifact inputs are staged from it, cleanup deletes from it). */
  readonly store?: import('./artifacts/store.ts').ArtifactStore;
  /** Recreates the Run's artifact staging directory when the Runtime has a store; returns its path. */
  prepareArtifactsDir(run: Run, runDir: string): Promise<string | undefined>;
  /** runDir: the Run-local directory holding outputs and artifacts. */
  collect(run: Run, runDir: string): Promise<Collected>;
}

const PREPARE_MESSAGES = ['no args or script provided', 'no script or args provided'];

export function classifyFailure(s: Summary, stderrTail = ''): { reason: string; message: string } {
  if (s.errorMessage === 'timeout' && s.exitCode === -1) return { reason: 'Timeout', message: 'timeout' };
  if (PREPARE_MESSAGES.includes(s.errorMessage))
    return { reason: 'PrepareSource', message: `prepare source: ${s.errorMessage}` };
  const base = s.errorMessage || `exit status ${s.exitCode}`;
  return { reason: 'RuntimeError', message: stderrTail ? `${base}; runtime stderr: ${stderrTail}` : base };
}

/** Outputs only; artifacts are added by ArtifactFinisher when the Runtime has a store. */
export class OutputsFinisher implements Finisher {
  constructor(protected readonly workspaceRoot: string) {}

  prepareArtifactsDir(_run: Run, _runDir: string): Promise<string | undefined> {
    return Promise.resolve(undefined);
  }

  async collect(_run: Run, runDir: string): Promise<Collected> {
    const out = await readOutputsFile(join(runDir, 'outputs'));
    if (!out.ok) return { ok: false, reason: out.reason, message: out.message };
    return { ok: true, outputs: out.outputs, artifactRefs: undefined };
  }

  protected async recreate(dir: string): Promise<string> {
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true, mode: 0o770 });
    return dir;
  }
}
