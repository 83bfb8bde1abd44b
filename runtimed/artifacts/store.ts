/**
 * The ArtifactStore contract (upstream §2.5): durable artifact bytes outside etcd, addressed by
 * immutable ArtifactRefs under `namespaces/<ns>/runs/<runUID>/<name>`, plus the store hash that
 * ties a Run's cleanup snapshot (status.artifactStore) to a runtime maintainer.
 */
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { Run, Runtime } from '../../lib/api/generated/kruntimes.ts';

export type ArtifactRef = NonNullable<NonNullable<Run['status']>['artifactRefs']>[number];
export type RuntimeArtifactStoreSpec = NonNullable<Runtime['spec']['artifactStore']>;
export type S3ArtifactStoreSpec = NonNullable<RuntimeArtifactStoreSpec['s3']>;
export type ArtifactDriver = RuntimeArtifactStoreSpec['driver'];
/** The artifact types runtimed produces (the API also knows `archive` and `blob`). */
export type ArtifactType = 'file' | 'directory';

export const DIRECTORY_CONTENT_TYPE = 'application/gzip';
export const RUN_ARTIFACT_FINALIZER = 'kruntimes.io/artifact-cleanup';
export const STORE_HASH_LABEL = 'kruntimes.io/artifact-store-hash';

/** Extra facts for a put; a bare ArtifactType is accepted where no extras are needed. */
export interface PutOptions {
  type: ArtifactType;
  /** Run name and Runtime name, recorded as provenance where the store supports metadata (S3). */
  runName?: string;
  runtime?: string;
  /** Upper bound for the stored representation (the tar.gz for directories); 0/undefined = store default. */
  maxSizeBytes?: number;
}

/** Restricts `open` to references of one namespace. */
export interface OpenScope {
  namespace: string;
}

export interface ArtifactStore {
  readonly driver: ArtifactDriver;
  /**
   * Stores a regular file or a directory (as its deterministic tar.gz) produced by a Run.
   * Rejections: ArtifactInvalid (bad name/type/size); store failures: ArtifactStoreError.
   */
  put(
    namespace: string,
    runUID: string,
    name: string,
    localPath: string,
    type: ArtifactType | PutOptions,
  ): Promise<ArtifactRef>;
  /**
   * Streams the stored bytes of a reference owned by this store (directories: the tar.gz).
   * Rejections: ArtifactInputInvalid (foreign or malformed reference), ArtifactNotFound.
   */
  open(ref: ArtifactRef, scope?: OpenScope): Promise<Readable>;
  /** Removes everything stored for one Run; succeeds when nothing is there. */
  deleteRun(namespace: string, runUID: string): Promise<void>;
}

export function putOptions(type: ArtifactType | PutOptions): PutOptions {
  return typeof type === 'string' ? { type } : type;
}

/**
 * The store spec in Go's encoding/json form: struct field order, `omitempty` fields dropped when
 * empty. This is what the upstream hash is computed over, so hashes agree across implementations.
 */
export function canonicalStoreSpec(spec: RuntimeArtifactStoreSpec): RuntimeArtifactStoreSpec {
  const out: RuntimeArtifactStoreSpec = { driver: spec.driver };
  if (spec.filesystem) out.filesystem = { volumeClaimName: spec.filesystem.volumeClaimName };
  if (spec.s3) {
    const s = spec.s3;
    const s3: S3ArtifactStoreSpec = { bucket: s.bucket };
    if (s.prefix) s3.prefix = s.prefix;
    if (s.region) s3.region = s.region;
    if (s.endpoint) s3.endpoint = s.endpoint;
    if (s.forcePathStyle) s3.forcePathStyle = true;
    if (s.credentialsSecretName) s3.credentialsSecretName = s.credentialsSecretName;
    if (s.uploadPartSize) s3.uploadPartSize = s.uploadPartSize;
    if (s.uploadConcurrency) s3.uploadConcurrency = s.uploadConcurrency;
    out.s3 = s3;
  }
  return out;
}

/** First 16 hex digits of sha256 over the JSON of the store spec (label kruntimes.io/artifact-store-hash). */
export function storeHash(spec: RuntimeArtifactStoreSpec): string {
  const payload = JSON.stringify(canonicalStoreSpec(spec));
  return createHash('sha256').update(payload).digest('hex').slice(0, 16);
}

/** RFC 3339 at second precision, as metav1.Time serializes. */
export function createdAtNow(now: Date): string {
  return now.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
