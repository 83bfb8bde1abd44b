/**
 * Finishing Runs of a Runtime with an ArtifactStore: after outputs, the staged artifacts are
 * validated and uploaded; before the first upload the Run records the store it used
 * (status.artifactStore) and gets the kruntimes.io/artifact-cleanup finalizer, so deleting the
 * Run deletes its artifacts. Any failure after the first upload rolls the uploads back.
 */
import type { RuntimedConfig } from './config.ts';
import { OutputsFinisher, type Collected, type Finisher } from './finish.ts';
import {
  collectStaged,
  createArtifactStore,
  isArtifactError,
  type ArtifactRef,
  type ArtifactStore,
  type RuntimeArtifactStoreSpec,
} from './artifacts/index.ts';
import { ArtifactError } from './artifacts/errors.ts';
import { isUnsafePathError, openChildDir, type DirHandle } from './artifacts/safe-dir.ts';
import type { Run } from './types.ts';

export interface RunRecorder {
  /** Writes status.artifactStore and adds the cleanup finalizer before the first upload. */
  beforeUpload(run: Run, spec: RuntimeArtifactStoreSpec): Promise<void>;
}

export class ArtifactFinisher extends OutputsFinisher {
  constructor(
    workspaceRoot: string,
    readonly store: ArtifactStore,
    readonly spec: RuntimeArtifactStoreSpec,
    private readonly runtime: string,
    private readonly recorder: RunRecorder,
  ) {
    super(workspaceRoot);
  }

  override prepareArtifactsDir(_run: Run, dir: DirHandle, runDir: string): Promise<string | undefined> {
    return this.recreate(dir, 'artifacts', runDir);
  }

  override async collect(run: Run, dir: DirHandle): Promise<Collected> {
    const out = await super.collect(run, dir);
    if (!out.ok) return out;
    const ns = run.metadata.namespace ?? '';
    const uid = run.metadata.uid ?? '';
    let uploaded = false;
    let artifacts: DirHandle | undefined;
    try {
      artifacts = await openArtifactsDir(dir);
      const staged = artifacts ? await collectStaged(artifacts) : [];
      if (!staged.length) return out;
      await this.recorder.beforeUpload(run, this.spec);
      const refs: ArtifactRef[] = [];
      for (const a of staged) {
        uploaded = true;
        refs.push(
          await this.store.put(ns, uid, a.name, a.path, {
            type: a.type,
            runName: run.metadata.name ?? '',
            runtime: this.runtime,
          }),
        );
      }
      return { ok: true, outputs: out.outputs, artifactRefs: refs };
    } catch (err) {
      if (uploaded) await this.store.deleteRun(ns, uid).catch(() => undefined);
      if (isArtifactError(err))
        return {
          ok: false,
          transient: err.transient,
          reason: err.reason === 'ArtifactStoreError' ? 'ArtifactStoreError' : 'ArtifactInvalid',
          message: err.message,
        };
      return {
        ok: false,
        transient: true,
        reason: 'ArtifactStoreError',
        message: err instanceof Error ? err.message : String(err),
      };
    } finally {
      await artifacts?.close().catch(() => undefined);
    }
  }
}

/** The staging directory below the Run directory, opened without following a link. */
async function openArtifactsDir(dir: DirHandle): Promise<DirHandle | undefined> {
  try {
    return await openChildDir(dir, 'artifacts');
  } catch (err) {
    if (!isUnsafePathError(err)) throw err;
    throw new ArtifactError(
      'ArtifactInvalid',
      'artifact staging directory must be a directory, not a symbolic link or file',
    );
  }
}

export async function makeFinisher(
  cfg: RuntimedConfig,
  recorder: RunRecorder,
): Promise<Finisher & { store?: ArtifactStore }> {
  if (!cfg.artifactStore) return new OutputsFinisher(cfg.workspaceRoot);
  const spec = cfg.artifactStore as unknown as RuntimeArtifactStoreSpec;
  const store = await createArtifactStore(spec, { filesystemRoot: cfg.artifactRoot });
  return new ArtifactFinisher(cfg.workspaceRoot, store, spec, cfg.runtime, recorder);
}
