/**
 * Finishing Runs of a Runtime with an ArtifactStore: after outputs, the staged artifacts are
 * validated and uploaded; before the first upload the Run records the store it used
 * (status.artifactStore) and gets the kruntimes.io/artifact-cleanup finalizer, so deleting the
 * Run deletes its artifacts. Any failure after the first upload rolls the uploads back.
 */
import { join } from 'node:path';
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

  override prepareArtifactsDir(_run: Run, runDir: string): Promise<string | undefined> {
    return this.recreate(join(runDir, 'artifacts'));
  }

  override async collect(run: Run, runDir: string): Promise<Collected> {
    const out = await super.collect(run, runDir);
    if (!out.ok) return out;
    const ns = run.metadata.namespace ?? '';
    const uid = run.metadata.uid ?? '';
    let uploaded = false;
    try {
      const staged = await collectStaged(join(runDir, 'artifacts'));
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
          reason: err.transient ? 'ArtifactStoreError' : 'ArtifactInvalid',
          message: err.message,
        };
      return {
        ok: false,
        transient: true,
        reason: 'ArtifactStoreError',
        message: err instanceof Error ? err.message : String(err),
      };
    }
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
