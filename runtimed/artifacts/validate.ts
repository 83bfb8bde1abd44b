/**
 * Artifact rules (upstream §2.5): names, references, limits, and the listing of a Run's staging
 * directory (`$KRUNTIME_ARTIFACTS_DIR`) into the artifacts to upload.
 */
import { lstat } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { ArtifactError, asArtifactError, errnoCode, quoteName, type ArtifactReason } from './errors.ts';
import type { ArtifactRef, ArtifactType } from './store.ts';
import type { DirHandle } from './safe-dir.ts';
import { readSortedNames, walkTree } from './walk.ts';

export const MAX_ARTIFACT_REFS = 32;
export const MAX_ARTIFACT_NAME_BYTES = 255;
export const DEFAULT_MAX_ARTIFACT_BYTES = 1024 ** 3;
export const DEFAULT_MAX_RUN_ARTIFACT_BYTES = 10 * 1024 ** 3;
/** Files and directories inside one directory artifact (also the extraction bound). */
export const DEFAULT_MAX_ARCHIVE_ENTRIES = 100_000;

export interface ArtifactLimits {
  /** Per artifact: source bytes of a file or of all files of a directory, and stored bytes. */
  maxArtifactBytes: number;
  /** Per Run: sum over all artifacts. */
  maxRunBytes: number;
  /** Entries (files and directories) inside one directory artifact. */
  maxEntries: number;
}

export const DEFAULT_ARTIFACT_LIMITS: Readonly<ArtifactLimits> = Object.freeze({
  maxArtifactBytes: DEFAULT_MAX_ARTIFACT_BYTES,
  maxRunBytes: DEFAULT_MAX_RUN_ARTIFACT_BYTES,
  maxEntries: DEFAULT_MAX_ARCHIVE_ENTRIES,
});

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** A JS string is valid UTF-8 when encoded iff it has no unpaired surrogate. */
export function isWellFormed(s: string): boolean {
  return !LONE_SURROGATE.test(s);
}

/** Returns why `name` is not a valid artifact name, or undefined when it is. */
export function artifactNameProblem(name: string): string | undefined {
  if (name === '') return 'artifact name is required';
  if (!isWellFormed(name)) return 'artifact name must be valid UTF-8';
  if (Buffer.byteLength(name, 'utf8') > MAX_ARTIFACT_NAME_BYTES)
    return `artifact name exceeds ${MAX_ARTIFACT_NAME_BYTES} bytes`;
  if (name === '.' || name === '..' || /[/\\]/.test(name))
    return `artifact name ${quoteName(name)} must not contain path separators`;
  if (name.includes('\0')) return `artifact name ${quoteName(name)} must not contain NUL`;
  return undefined;
}

export function assertArtifactName(name: string, reason: ArtifactReason = 'ArtifactInvalid'): void {
  const problem = artifactNameProblem(name);
  if (problem) throw new ArtifactError(reason, problem);
}

/** Namespace and Run UID become directory names / key segments: they must be single safe components. */
export function assertPathComponent(value: string, field: string, reason: ArtifactReason = 'ArtifactInvalid'): void {
  if (value === '' || value === '.' || value === '..' || /[/\\\0]/.test(value) || !isWellFormed(value)) {
    throw new ArtifactError(reason, `${field} ${quoteName(value)} is not a safe path component`);
  }
}

/** A store-relative path: non-empty, relative, no '.', '..' or empty segments. */
export function relativePathProblem(path: string): string | undefined {
  if (path === '' || path.length > 4096) return 'must be 1..4096 characters';
  if (path.startsWith('/') || path.includes('\\') || path.includes('\0')) return 'must be a relative path';
  if (path.split('/').some((s) => s === '' || s === '.' || s === '..'))
    return 'must not contain empty, "." or ".." segments';
  return undefined;
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const ARTIFACT_TYPES = ['file', 'directory', 'archive', 'blob'];
const DIGEST = /^sha256:[0-9a-f]{64}$/;

function checkFilesystemLocation(fs: Json, label: string, fail: (m: string) => never): ArtifactRef['location'] {
  if (typeof fs.path !== 'string') fail(`${label}: filesystem location path is required`);
  const path = fs.path;
  const problem = relativePathProblem(path);
  if (problem) fail(`${label}: filesystem location path ${problem}`);
  const claim = fs.volumeClaimName;
  if (claim !== undefined && typeof claim !== 'string') fail(`${label}: volumeClaimName must be a string`);
  return { filesystem: { path, ...(typeof claim === 'string' && claim ? { volumeClaimName: claim } : {}) } };
}

function checkLocation(ref: Json, label: string, fail: (m: string) => never): ArtifactRef['location'] {
  const location = ref.location;
  if (!isObject(location)) fail(`${label}: location is required`);
  const { filesystem: fs, s3 } = location;
  if (ref.driver === 'filesystem') {
    if (!isObject(fs) || s3 !== undefined)
      fail(`${label}: a filesystem artifact must contain only a filesystem location`);
    return checkFilesystemLocation(fs, label, fail);
  }
  if (!isObject(s3) || fs !== undefined) fail(`${label}: an s3 artifact must contain only an s3 location`);
  if (typeof s3.bucket !== 'string' || s3.bucket === '' || typeof s3.key !== 'string' || s3.key === '') {
    fail(`${label}: s3 bucket and key are required`);
  }
  // A '..' or empty segment may be normalised by an S3 server or proxy into another Run's or namespace's key.
  const keyProblem = relativePathProblem(s3.key);
  if (keyProblem) fail(`${label}: s3 key ${keyProblem}`);
  return { s3: { bucket: s3.bucket, key: s3.key } };
}

function checkScalars(ref: Json, label: string, fail: (m: string) => never): void {
  if (ref.driver !== 'filesystem' && ref.driver !== 's3')
    fail(`${label}: unsupported artifact driver ${JSON.stringify(ref.driver)}`);
  if (typeof ref.type !== 'string' || !ARTIFACT_TYPES.includes(ref.type))
    fail(`${label}: unsupported artifact type ${JSON.stringify(ref.type)}`);
  if (typeof ref.sizeBytes !== 'number' || !Number.isSafeInteger(ref.sizeBytes) || ref.sizeBytes < 0) {
    fail(`${label}: sizeBytes must be a non-negative integer`);
  }
  if (ref.digest !== undefined && ref.digest !== '' && (typeof ref.digest !== 'string' || !DIGEST.test(ref.digest))) {
    fail(`${label}: digest must be sha256:<64 hex digits>`);
  }
}

/**
 * Checks an ArtifactRef that may come from untrusted JSON (a Run spec) and returns a clean copy.
 * Never throws anything but an ArtifactError.
 */
export function validateArtifactRef(ref: unknown, reason: ArtifactReason = 'ArtifactInputInvalid'): ArtifactRef {
  const fail = (m: string): never => {
    throw new ArtifactError(reason, m);
  };
  if (!isObject(ref)) return fail('artifact reference must be an object');
  if (typeof ref.name !== 'string') return fail('artifact reference name is required');
  const label = `artifact ${quoteName(ref.name)}`;
  const nameProblem = artifactNameProblem(ref.name);
  if (nameProblem) fail(`invalid artifact reference: ${nameProblem}`);
  checkScalars(ref, label, fail);
  const location = checkLocation(ref, label, fail);
  return {
    name: ref.name,
    driver: ref.driver as ArtifactRef['driver'],
    type: ref.type as ArtifactRef['type'],
    location,
    sizeBytes: ref.sizeBytes as number,
    createdAt: typeof ref.createdAt === 'string' ? ref.createdAt : '',
    ...(typeof ref.digest === 'string' && ref.digest ? { digest: ref.digest } : {}),
    ...(typeof ref.contentType === 'string' && ref.contentType ? { contentType: ref.contentType } : {}),
  };
}

/** `namespaces/<ns>/runs/<uid>/<name>`, the layout shared by all drivers. */
export function runArtifactPath(namespace: string, runUID: string, name: string): string {
  assertPathComponent(namespace, 'run namespace');
  assertPathComponent(runUID, 'run UID');
  assertArtifactName(name);
  return posix.join('namespaces', namespace, 'runs', runUID, name);
}

export interface StagedArtifact {
  name: string;
  path: string;
  type: ArtifactType;
  /** Source bytes: the file size, or the sum of file sizes of a directory. */
  sizeBytes: number;
}

async function inspectDirectory(path: string, label: string, limits: ArtifactLimits): Promise<number> {
  let total = 0;
  let entries = 0;
  for await (const e of walkTree(path, { label, reason: 'ArtifactInvalid' })) {
    if (++entries > limits.maxEntries)
      throw new ArtifactError('ArtifactInvalid', `${label}: more than ${limits.maxEntries} entries`);
    total += e.size;
    if (total > limits.maxArtifactBytes)
      throw new ArtifactError('ArtifactInvalid', `${label}: size exceeds ${limits.maxArtifactBytes} bytes`);
  }
  return total;
}

async function inspectStaged(dir: string, name: string, limits: ArtifactLimits): Promise<StagedArtifact> {
  const label = `artifact ${quoteName(name)}`;
  const problem = artifactNameProblem(name);
  if (problem) throw new ArtifactError('ArtifactInvalid', `invalid artifact ${quoteName(name)}: ${problem}`);
  const path = join(dir, name);
  let st;
  try {
    st = await lstat(path);
  } catch (err) {
    throw asArtifactError(err, 'ArtifactInvalid', `${label}: cannot inspect`);
  }
  if (st.isSymbolicLink()) throw new ArtifactError('ArtifactInvalid', `${label}: symbolic links are not allowed`);
  if (st.isFile()) {
    if (st.size > limits.maxArtifactBytes) {
      throw new ArtifactError('ArtifactInvalid', `${label}: size ${st.size} exceeds ${limits.maxArtifactBytes} bytes`);
    }
    return { name, path, type: 'file', sizeBytes: st.size };
  }
  if (!st.isDirectory()) throw new ArtifactError('ArtifactInvalid', `${label}: special files are not allowed`);
  return { name, path, type: 'directory', sizeBytes: await inspectDirectory(path, label, limits) };
}

/**
 * Lists the top-level entries of a staging directory in byte order of their names and validates
 * each (name, type, nested content, per-artifact and per-Run size). A missing directory means
 * no artifacts; the directory itself must not be a symlink. runtimed passes the directory open
 * (a DirHandle from safe-dir.ts), so no component of its path is resolved again. Throws ArtifactError('ArtifactInvalid') naming the offending entry.
 */
export async function collectStaged(
  dir: string | DirHandle,
  limits: Partial<ArtifactLimits> = {},
): Promise<StagedArtifact[]> {
  const lim: ArtifactLimits = { ...DEFAULT_ARTIFACT_LIMITS, ...limits };
  if (typeof dir !== 'string') return collectNames(dir.path, lim);
  // The Run's code could have replaced its staging directory with a symlink to files it must not export.
  const st = await lstat(dir).catch((err: unknown) => {
    if (errnoCode(err) === 'ENOENT') return undefined;
    throw asArtifactError(err, 'ArtifactInvalid', 'artifact staging directory: cannot inspect');
  });
  if (!st) return [];
  if (!st.isDirectory())
    throw new ArtifactError(
      'ArtifactInvalid',
      'artifact staging directory must be a directory, not a symbolic link or file',
    );
  return collectNames(dir, lim);
}

async function collectNames(dir: string, lim: ArtifactLimits): Promise<StagedArtifact[]> {
  const names = await readSortedNames(
    dir,
    (n) => (n ? `artifact ${quoteName(n)}` : 'artifact staging directory'),
    'ArtifactInvalid',
  );
  if (names.length > MAX_ARTIFACT_REFS) {
    throw new ArtifactError('ArtifactInvalid', `artifact count ${names.length} exceeds limit ${MAX_ARTIFACT_REFS}`);
  }
  const out: StagedArtifact[] = [];
  let total = 0;
  for (const name of names) {
    const staged = await inspectStaged(dir, name, lim);
    total += staged.sizeBytes;
    if (total > lim.maxRunBytes)
      throw new ArtifactError('ArtifactInvalid', `total artifact size exceeds ${lim.maxRunBytes} bytes`);
    out.push(staged);
  }
  return out;
}

/** Type of a local artifact source; symlinks and special files are ArtifactInvalid. */
export async function inspectSource(localPath: string, label: string): Promise<ArtifactType> {
  let st;
  try {
    st = await lstat(localPath);
  } catch (err) {
    throw asArtifactError(err, 'ArtifactInvalid', `${label}: cannot inspect`);
  }
  if (st.isSymbolicLink()) throw new ArtifactError('ArtifactInvalid', `${label}: symbolic links are not allowed`);
  if (st.isFile()) return 'file';
  if (st.isDirectory()) return 'directory';
  throw new ArtifactError('ArtifactInvalid', `${label}: special files are not allowed`);
}
