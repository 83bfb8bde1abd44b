/** The artifact layer of runtimed: staging validation, deterministic archives, safe extraction and the stores. */
import { ArtifactError } from './errors.ts';
import { DEFAULT_FILESYSTEM_ROOT, FilesystemArtifactStore } from './filesystem-store.ts';
import type { S3StoreOptions } from './s3-store.ts';
import type { ArtifactStore, RuntimeArtifactStoreSpec } from './store.ts';

export * from './errors.ts';
export * from './store.ts';
export * from './validate.ts';
export { archiveDirectory, writeArchive, type ArchiveOptions, type ArchiveResult } from './archive.ts';
export {
  extractArchive,
  stageFile,
  writeStreamAtomically,
  DEFAULT_EXTRACT_LIMITS,
  type ExtractLimits,
  type ExtractResult,
} from './extract.ts';
export {
  stageArtifactInput,
  stageArtifactInputs,
  inputPathSegments,
  type ArtifactInput,
  type StagedInput,
  type StageOptions,
} from './stage.ts';
export { FilesystemArtifactStore, DEFAULT_FILESYSTEM_ROOT } from './filesystem-store.ts';

export interface CreateStoreOptions {
  /** Filesystem store root (the PVC mount); /var/lib/kruntimes/artifacts by default. */
  filesystemRoot?: string;
  maxArtifactBytes?: number;
  s3?: S3StoreOptions;
}

/** Builds the store a Runtime's spec.artifactStore describes; a spec that matches no driver is ArtifactStoreConfigInvalid. */
export async function createArtifactStore(
  spec: RuntimeArtifactStoreSpec,
  opts: CreateStoreOptions = {},
): Promise<ArtifactStore> {
  if (typeof spec !== 'object' || spec === null)
    throw new ArtifactError('ArtifactStoreConfigInvalid', 'artifact store configuration must be an object');
  if (spec.driver === 'filesystem' && spec.filesystem && !spec.s3) {
    return FilesystemArtifactStore.create({
      root: opts.filesystemRoot ?? DEFAULT_FILESYSTEM_ROOT,
      volumeClaimName: spec.filesystem.volumeClaimName,
      ...(opts.maxArtifactBytes ? { maxArtifactBytes: opts.maxArtifactBytes } : {}),
    });
  }
  if (spec.driver === 's3') {
    // The AWS SDK is loaded only by the Pods of a Runtime whose store is S3.
    const { S3ArtifactStore } = await import('./s3-store.ts');
    return S3ArtifactStore.fromSpec(spec, {
      ...opts.s3,
      ...(opts.maxArtifactBytes ? { maxArtifactBytes: opts.maxArtifactBytes } : {}),
    });
  }
  throw new ArtifactError(
    'ArtifactStoreConfigInvalid',
    'exactly one artifact store configuration matching driver must be set',
  );
}
