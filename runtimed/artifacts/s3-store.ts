/**
 * S3-compatible ArtifactStore (upstream §2.5) on @aws-sdk/client-s3 v3 and the multipart
 * `Upload` of @aws-sdk/lib-storage. Keys are `[<prefix>/]namespaces/<ns>/runs/<uid>/<name>`;
 * objects carry provenance metadata (§1.7). Credentials come from the SDK default provider
 * chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY from the store's credentials Secret).
 */
import { DeleteObjectCommand, GetObjectCommand, S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { constants } from 'node:fs';
import { mkdtemp, open, rm, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable, pipeline as pipelineCb } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  keyRoot as sharedKeyRoot,
  normalizePrefix,
  prefixProblem,
  runKeyPrefix as sharedRunKeyPrefix,
} from '../../lib/artifacts/keys.ts';
import { deleteS3Prefix } from '../../lib/artifacts/s3-delete.ts';
import { s3ClientOptions } from '../../lib/artifacts/gc-credentials.ts';
import { archiveDirectory } from './archive.ts';
import { DigestStream } from './digest.ts';
import { limitedDigest, openFileSource } from './file-source.ts';
import { ArtifactError, asArtifactError, quoteName } from './errors.ts';
import {
  DIRECTORY_CONTENT_TYPE,
  createdAtNow,
  putOptions,
  type ArtifactRef,
  type ArtifactStore,
  type ArtifactType,
  type OpenScope,
  type PutOptions,
  type RuntimeArtifactStoreSpec,
  type S3ArtifactStoreSpec,
} from './store.ts';
import {
  DEFAULT_MAX_ARTIFACT_BYTES,
  assertArtifactName,
  assertPathComponent,
  inspectSource,
  validateArtifactRef,
} from './validate.ts';

export const MIN_UPLOAD_PART_SIZE = 5 * 1024 * 1024;
export const DEFAULT_UPLOAD_PART_SIZE = MIN_UPLOAD_PART_SIZE;
export const DEFAULT_UPLOAD_CONCURRENCY = 5;
export const MAX_S3_KEY_BYTES = 1024;

/** The validated, normalised form of an S3 store spec. */
export interface S3StoreConfig {
  bucket: string;
  /** Trimmed of spaces and '/'; '' when unset. */
  prefix: string;
  region: string;
  endpoint?: string;
  forcePathStyle: boolean;
  partSize: number;
  concurrency: number;
}

export { normalizePrefix };

function configInvalid(message: string): ArtifactError {
  return new ArtifactError('ArtifactStoreConfigInvalid', message);
}

function checkEndpoint(endpoint: string): void {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw configInvalid(`invalid s3 endpoint ${quoteName(endpoint)}`);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.host === '')
    throw configInvalid(`invalid s3 endpoint ${quoteName(endpoint)}`);
}

function positiveInteger(value: number | undefined, min: number, what: string): number | undefined {
  if (value === undefined || value === 0) return undefined;
  if (!Number.isSafeInteger(value) || value < min)
    throw configInvalid(`s3 ${what} must be an integer of at least ${min}`);
  return value;
}

/** Validates an S3 store spec; the region falls back to AWS_REGION / AWS_DEFAULT_REGION, then us-east-1. */
export function resolveS3Config(
  spec: S3ArtifactStoreSpec | undefined,
  env: NodeJS.ProcessEnv = process.env,
): S3StoreConfig {
  if (!spec) throw configInvalid('s3 artifact store configuration is required');
  const bucket = typeof spec.bucket === 'string' ? spec.bucket.trim() : '';
  if (bucket === '') throw configInvalid('s3 bucket is required');
  if (bucket.includes('/')) throw configInvalid('s3 bucket must not contain path separators');
  const prefix = normalizePrefix(spec.prefix);
  if (prefix.length > 1024) throw configInvalid('s3 prefix exceeds 1024 characters');
  const problem = prefixProblem(prefix);
  if (problem) throw configInvalid(`s3 prefix ${quoteName(prefix)} ${problem}`);
  if (spec.endpoint) checkEndpoint(spec.endpoint);
  return {
    bucket,
    prefix,
    region: spec.region || env.AWS_REGION || env.AWS_DEFAULT_REGION || 'us-east-1',
    ...(spec.endpoint ? { endpoint: spec.endpoint } : {}),
    forcePathStyle: spec.forcePathStyle === true,
    partSize:
      positiveInteger(spec.uploadPartSize, MIN_UPLOAD_PART_SIZE, 'upload part size') ?? DEFAULT_UPLOAD_PART_SIZE,
    concurrency: positiveInteger(spec.uploadConcurrency, 1, 'upload concurrency') ?? DEFAULT_UPLOAD_CONCURRENCY,
  };
}

/**
 * Client options. No credentials are set, so the SDK default provider chain applies. With a
 * custom endpoint, checksums are only sent where S3 requires them (S3-compatible servers often
 * reject the newer default flexible checksums).
 */
export function s3ClientConfig(cfg: S3StoreConfig): S3ClientConfig {
  return s3ClientOptions(cfg);
}

/** The shared key root (lib/artifacts/keys.ts); an unsafe prefix is ArtifactStoreConfigInvalid. */
export function keyRoot(prefix: string): string {
  try {
    return sharedKeyRoot(prefix);
  } catch (err) {
    throw configInvalid(err instanceof Error ? err.message : String(err));
  }
}

/** `…/namespaces/<ns>/runs/<uid>/` (lib/artifacts/keys.ts, the key function the gc function uses too). */
export function runKeyPrefix(prefix: string, namespace: string, runUID: string): string {
  assertPathComponent(namespace, 'run namespace');
  assertPathComponent(runUID, 'run UID');
  keyRoot(prefix);
  return sharedRunKeyPrefix(prefix, namespace, runUID);
}

export function objectKey(prefix: string, namespace: string, runUID: string, name: string): string {
  assertArtifactName(name);
  const key = `${runKeyPrefix(prefix, namespace, runUID)}${name}`;
  if (Buffer.byteLength(key, 'utf8') > MAX_S3_KEY_BYTES) {
    throw new ArtifactError(
      'ArtifactInvalid',
      `artifact ${quoteName(name)}: object key exceeds ${MAX_S3_KEY_BYTES} bytes`,
    );
  }
  return key;
}

/** S3 user metadata travels in HTTP headers: non-printable-ASCII values are RFC 2047 encoded. */
export function encodeMetadataValue(value: string): string {
  return /^[\x20-\x7e]*$/.test(value) ? value : `=?UTF-8?B?${Buffer.from(value, 'utf8').toString('base64')}?=`;
}

export interface ObjectProvenance {
  namespace: string;
  runUID: string;
  runName?: string;
  runtime?: string;
  name: string;
  type: ArtifactType;
  digest: string;
}

export function objectMetadata(p: ObjectProvenance): Record<string, string> {
  const m: Record<string, string> = {};
  if (p.runName) m['kruntimes-run-name'] = p.runName;
  m['kruntimes-run-uid'] = p.runUID;
  m['kruntimes-namespace'] = p.namespace;
  if (p.runtime) m['kruntimes-runtime'] = p.runtime;
  m['kruntimes-artifact-name'] = p.name;
  m['kruntimes-artifact-type'] = p.type;
  m['kruntimes-digest'] = p.digest;
  for (const k of Object.keys(m)) m[k] = encodeMetadataValue(m[k] as string);
  return m;
}

export interface S3RefFields {
  name: string;
  type: ArtifactType;
  bucket: string;
  key: string;
  sizeBytes: number;
  digest: string;
  contentType: string;
  createdAt: string;
}

export function buildS3Ref(f: S3RefFields): ArtifactRef {
  return {
    name: f.name,
    driver: 's3',
    type: f.type,
    location: { s3: { bucket: f.bucket, key: f.key } },
    sizeBytes: f.sizeBytes,
    digest: f.digest,
    contentType: f.contentType,
    createdAt: f.createdAt,
  };
}

/** Checks that a reference belongs to this store (bucket and key root, optionally one namespace). */
export function ownedS3Location(
  ref: ArtifactRef,
  cfg: S3StoreConfig,
  scope?: OpenScope,
): { bucket: string; key: string; label: string } {
  const r = validateArtifactRef(ref);
  const label = `artifact ${quoteName(r.name)}`;
  const fail = (m: string): never => {
    throw new ArtifactError('ArtifactInputInvalid', `${label}: ${m}`);
  };
  const loc = r.location.s3;
  if (r.driver !== 's3' || !loc) return fail('not an s3 artifact');
  if (loc.bucket !== cfg.bucket)
    fail(`bucket ${quoteName(loc.bucket)} does not match the configured bucket ${quoteName(cfg.bucket)}`);
  const root = keyRoot(cfg.prefix);
  if (!loc.key.startsWith(root)) fail(`key ${quoteName(loc.key)} is outside the configured prefix`);
  if (scope && !loc.key.startsWith(`${root}${scope.namespace}/`))
    fail(`key belongs to another namespace than ${quoteName(scope.namespace)}`);
  return { bucket: loc.bucket, key: loc.key, label };
}

function isNotFound(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as { name?: unknown; $metadata?: { httpStatusCode?: unknown } };
  return e.name === 'NoSuchKey' || e.name === 'NotFound' || e.$metadata?.httpStatusCode === 404;
}

export interface S3StoreOptions {
  client?: S3Client;
  now?: () => Date;
  maxArtifactBytes?: number;
  /** Where directory archives are built before upload; os.tmpdir() by default. */
  tmpDir?: string;
  env?: NodeJS.ProcessEnv;
}

interface Prepared {
  handle: FileHandle;
  sizeBytes: number;
  digest: string;
  contentType: string;
  cleanup: () => Promise<void>;
}

export class S3ArtifactStore implements ArtifactStore {
  readonly driver = 's3' as const;
  readonly client: S3Client;
  private readonly now: () => Date;
  private readonly maxArtifactBytes: number;
  private readonly tmpDir: string;

  constructor(
    readonly config: S3StoreConfig,
    opts: S3StoreOptions = {},
  ) {
    this.client = opts.client ?? new S3Client(s3ClientConfig(config));
    this.now = opts.now ?? ((): Date => new Date());
    this.maxArtifactBytes = opts.maxArtifactBytes ?? DEFAULT_MAX_ARTIFACT_BYTES;
    this.tmpDir = opts.tmpDir ?? tmpdir();
  }

  static fromSpec(spec: RuntimeArtifactStoreSpec, opts: S3StoreOptions = {}): S3ArtifactStore {
    if (spec.driver !== 's3' || !spec.s3 || spec.filesystem)
      throw configInvalid('artifact store driver s3 requires exactly an s3 configuration');
    return new S3ArtifactStore(resolveS3Config(spec.s3, opts.env), opts);
  }

  async put(
    namespace: string,
    runUID: string,
    name: string,
    localPath: string,
    type: ArtifactType | PutOptions,
  ): Promise<ArtifactRef> {
    const o = putOptions(type);
    const key = objectKey(this.config.prefix, namespace, runUID, name);
    const label = `artifact ${quoteName(name)}`;
    const actual = await inspectSource(localPath, label);
    if (actual !== o.type)
      throw new ArtifactError('ArtifactInvalid', `${label}: type "${o.type}" does not match source type "${actual}"`);
    const max = Math.min(o.maxSizeBytes || this.maxArtifactBytes, this.maxArtifactBytes);
    const prepared =
      actual === 'file' ? await prepareFile(localPath, label, max) : await this.prepareDirectory(localPath, label, max);
    try {
      const metadata = objectMetadata({
        namespace,
        runUID,
        runName: o.runName,
        runtime: o.runtime,
        name,
        type: actual,
        digest: prepared.digest,
      });
      await this.upload(key, prepared, metadata, label);
      return buildS3Ref({
        name,
        type: actual,
        bucket: this.config.bucket,
        key,
        sizeBytes: prepared.sizeBytes,
        digest: prepared.digest,
        contentType: prepared.contentType,
        createdAt: createdAtNow(this.now()),
      });
    } finally {
      await prepared.cleanup();
    }
  }

  private async prepareDirectory(localPath: string, label: string, max: number): Promise<Prepared> {
    const dir = await mkdtemp(join(this.tmpDir, 'kruntimes-artifact-')).catch((err: unknown) => {
      throw asArtifactError(err, 'ArtifactStoreError', `${label}: cannot create a temporary directory`);
    });
    const cleanup = (): Promise<void> => rm(dir, { recursive: true, force: true }).catch(() => undefined);
    try {
      const path = join(dir, 'archive.tar.gz');
      const r = await archiveDirectory(localPath, path, {
        label,
        maxStoredBytes: max,
        maxSourceBytes: this.maxArtifactBytes,
      });
      const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
      return {
        handle,
        ...r,
        contentType: DIRECTORY_CONTENT_TYPE,
        cleanup: async () => {
          await handle.close().catch(() => undefined);
          await cleanup();
        },
      };
    } catch (err) {
      await cleanup();
      throw err;
    }
  }

  /** Uploads from the prepared handle, re-hashing on the way: content that changed since hashing is rejected and removed. */
  private async upload(key: string, p: Prepared, metadata: Record<string, string>, label: string): Promise<void> {
    const check = new DigestStream(
      p.sizeBytes,
      () => new ArtifactError('ArtifactInvalid', `${label}: file changed during upload`),
    );
    const body = pipelineCb(p.handle.createReadStream({ start: 0, autoClose: false }), check, () => undefined);
    const { bucket } = this.config;
    try {
      const upload = new Upload({
        client: this.client,
        params: { Bucket: bucket, Key: key, Body: body, ContentType: p.contentType, Metadata: metadata },
        partSize: this.config.partSize,
        queueSize: this.config.concurrency,
        leavePartsOnError: false,
      });
      await upload.done();
    } catch (err) {
      throw asArtifactError(err, 'ArtifactStoreError', `${label}: upload to s3://${bucket}/${key} failed`);
    }
    if (check.bytes !== p.sizeBytes || check.digest() !== p.digest) {
      await this.client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key })).catch(() => undefined);
      throw new ArtifactError('ArtifactInvalid', `${label}: file changed during upload`);
    }
  }

  async open(ref: ArtifactRef, scope?: OpenScope): Promise<Readable> {
    const { bucket, key, label } = ownedS3Location(ref, this.config, scope);
    let body: unknown;
    try {
      body = (await this.client.send(new GetObjectCommand({ Bucket: bucket, Key: key }))).Body;
    } catch (err) {
      if (isNotFound(err))
        throw new ArtifactError('ArtifactNotFound', `${label} was not found in the artifact store`, { cause: err });
      throw asArtifactError(err, 'ArtifactStoreError', `${label}: cannot open s3://${bucket}/${key}`);
    }
    if (!(body instanceof Readable))
      throw new ArtifactError('ArtifactStoreError', `${label}: s3 returned no readable body`);
    return body;
  }

  /** Deletes every key under the Run prefix (lib/artifacts/s3-delete.ts: all pages listed first; nothing there is success). */
  async deleteRun(namespace: string, runUID: string): Promise<void> {
    const prefix = runKeyPrefix(this.config.prefix, namespace, runUID);
    const { bucket } = this.config;
    try {
      await deleteS3Prefix(this.client, bucket, prefix);
    } catch (err) {
      throw asArtifactError(err, 'ArtifactStoreError', `cannot delete artifacts under s3://${bucket}/${prefix}`);
    }
  }
}

/** Opens a file artifact O_NOFOLLOW, checks it, sniffs its content type and hashes it before upload. */
async function prepareFile(localPath: string, label: string, max: number): Promise<Prepared> {
  const { handle, contentType } = await openFileSource(localPath, label, max);
  const cleanup = (): Promise<void> => handle.close().catch(() => undefined);
  try {
    const digest = limitedDigest(label, max);
    await pipeline(
      handle.createReadStream({ start: 0, autoClose: false }),
      digest,
      async (source: AsyncIterable<Buffer>) => {
        for await (const _ of source) {
          /* hash only */
        }
      },
    );
    return {
      handle,
      sizeBytes: digest.bytes,
      digest: digest.digest(),
      contentType,
      cleanup,
    };
  } catch (err) {
    await cleanup();
    throw asArtifactError(err, 'ArtifactInvalid', `${label}: cannot read`);
  }
}
