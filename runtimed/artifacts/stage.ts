/**
 * Run.spec.artifactInputs (seed 000): before execution each immutable ArtifactRef is opened
 * through the configured store and staged below the Run's working directory: a file artifact is
 * copied to `path`, a directory artifact is extracted there (extract.ts rules). Size and digest
 * are verified against the reference. Staging is all-or-nothing over the whole input list.
 *
 * Re-staging is idempotent: when the destination already holds the artifact's content (two steps
 * of one job importing the same artifact into their shared workspace, an in-place retry) staging
 * succeeds and leaves it alone. A destination holding anything else fails with the stable reason
 * ArtifactInputConflict and is never replaced (docs/crds.md, "Artifact inputs").
 */
import { randomBytes } from 'node:crypto';
import { lstat, rm, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { ArtifactError, asArtifactError, errnoCode, quoteName } from './errors.ts';
import { extractArchive, writeStreamAtomically, DEFAULT_EXTRACT_LIMITS, type ExtractLimits } from './extract.ts';
import { sameContent } from './compare.ts';
import { mkdirBeneath } from './safe-path.ts';
import type { ArtifactRef, ArtifactStore } from './store.ts';
import { validateArtifactRef } from './validate.ts';

export interface ArtifactInput {
  artifactRef: unknown;
  path: unknown;
}

export interface StagedInput {
  path: string;
  type: ArtifactRef['type'];
  sizeBytes: number;
}

export interface StageOptions {
  /** When set, only references in this namespace are opened. */
  namespace?: string;
  /** maxBytes bounds both the download and the extracted content. */
  limits?: Partial<ExtractLimits>;
}

const invalid = (message: string): ArtifactError => new ArtifactError('ArtifactInputInvalid', message);

/** Validates a destination path: relative, no '..', no backslash or NUL; returns its segments. */
export function inputPathSegments(path: unknown): string[] {
  if (typeof path !== 'string' || path === '') throw invalid('artifact input path is required');
  const label = `artifact input path ${quoteName(path)}`;
  if (path.startsWith('/')) throw invalid(`${label} must be relative`);
  if (path.includes('\0') || path.includes('\\')) throw invalid(`${label} must not contain NUL or backslash`);
  const segments = path.split('/').filter((s) => s !== '' && s !== '.');
  if (segments.includes('..')) throw invalid(`${label} must not contain a '..' segment`);
  if (segments.length === 0) throw invalid(`${label} must name an entry below the working directory`);
  if (Buffer.byteLength(path) > 4096 || segments.some((s) => Buffer.byteLength(s) > 255))
    throw invalid(`${label} is too long`);
  return segments;
}

async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return false;
    throw err;
  }
}

/** Errors of the store stream itself (network, I/O) are transient; everything else is about the input. */
function trackSource(stream: Readable): () => unknown {
  let failure: unknown;
  stream.once('error', (err) => {
    failure = err;
  });
  return () => failure;
}

async function download(
  store: ArtifactStore,
  ref: ArtifactRef,
  dest: string,
  opts: { namespace?: string; maxBytes: number; label: string },
): Promise<void> {
  const stream = await store.open(ref, opts.namespace ? { namespace: opts.namespace } : undefined);
  const sourceFailure = trackSource(stream);
  try {
    await writeStreamAtomically(stream, dest, {
      maxBytes: Math.min(ref.sizeBytes, opts.maxBytes),
      expectedSize: ref.sizeBytes,
      label: opts.label,
      mode: 0o644,
      ...(ref.digest ? { expectedDigest: ref.digest } : {}),
    });
  } catch (err) {
    const failure = sourceFailure();
    if (failure && !(failure instanceof ArtifactError))
      throw asArtifactError(failure, 'ArtifactStoreError', `${opts.label}: download failed`);
    throw err;
  }
}

/** Stages one input below `workDir`; on failure nothing is left at its destination. */
export async function stageArtifactInput(
  store: ArtifactStore,
  input: ArtifactInput,
  workDir: string,
  opts: StageOptions = {},
): Promise<StagedInput> {
  return (await stageOne(store, input, workDir, opts)).staged;
}

interface Fetch {
  store: ArtifactStore;
  ref: ArtifactRef;
  namespace: string | undefined;
  limits: ExtractLimits;
  label: string;
}

/** Downloads (file) or downloads and extracts (directory) the artifact to `target`, which must not exist. */
async function fetchTo(f: Fetch, parent: string, target: string): Promise<void> {
  const dl = { namespace: f.namespace, maxBytes: f.limits.maxBytes, label: f.label };
  if (f.ref.type !== 'directory') return download(f.store, f.ref, target, dl);
  const archive = join(parent, `.kruntimes-input-${randomBytes(8).toString('hex')}.tar.gz`);
  try {
    await download(f.store, f.ref, archive, dl);
    await extractArchive(archive, target, f.limits).catch((err: unknown) => {
      throw err instanceof ArtifactError
        ? new ArtifactError(err.reason, `${f.label}: ${err.message}`, { cause: err })
        : err;
    });
  } finally {
    await rm(archive, { force: true }).catch(() => undefined);
  }
}

/**
 * The destination already exists (a second step of the job, an in-place retry): the artifact is
 * fetched beside it and compared. The same content is success and leaves the destination as it
 * is; different content (or a symlink, or another kind) is ArtifactInputConflict and nothing changes.
 */
async function restage(f: Fetch, parent: string, dest: string): Promise<void> {
  const fresh = join(parent, `.kruntimes-restage-${randomBytes(8).toString('hex')}`);
  try {
    await fetchTo(f, parent, fresh);
    if (await sameContent(dest, fresh, f.ref.type === 'directory' ? 'directory' : 'file')) return;
  } finally {
    await rm(fresh, { recursive: true, force: true }).catch(() => undefined);
  }
  throw new ArtifactError('ArtifactInputConflict', `${f.label}: destination already exists with different content`);
}

async function stageOne(
  store: ArtifactStore,
  input: ArtifactInput,
  workDir: string,
  opts: StageOptions,
): Promise<{ staged: StagedInput; created: string[]; fresh: boolean }> {
  const ref = validateArtifactRef(input.artifactRef);
  const segments = inputPathSegments(input.path);
  const shown = segments.join('/');
  const label = `artifact ${quoteName(ref.name)} for path ${quoteName(shown)}`;
  const limits: ExtractLimits = { ...DEFAULT_EXTRACT_LIMITS, ...opts.limits };
  if (ref.sizeBytes > limits.maxBytes)
    throw invalid(`${label}: size ${ref.sizeBytes} exceeds ${limits.maxBytes} bytes`);
  const { path: parent, created } = await mkdirBeneath(workDir, segments.slice(0, -1), 'ArtifactInputInvalid', 0o755);
  const dest = join(parent, segments[segments.length - 1] as string);
  const f: Fetch = { store, ref, namespace: opts.namespace, limits, label };
  const staged = { path: shown, type: ref.type, sizeBytes: ref.sizeBytes };
  let fresh = true;
  try {
    if (await exists(dest)) {
      fresh = false;
      await restage(f, parent, dest);
    } else {
      await fetchTo(f, parent, dest);
    }
  } catch (err) {
    for (const dir of created.reverse()) await rmdir(dir).catch(() => undefined);
    throw asArtifactError(err, 'ArtifactInputInvalid', `${label}: cannot stage`);
  }
  return { staged, created, fresh };
}

function assertDisjoint(all: string[][]): void {
  for (let i = 0; i < all.length; i++) {
    for (let j = i + 1; j < all.length; j++) {
      const [a, b] = [all[i] as string[], all[j] as string[]];
      const n = Math.min(a.length, b.length);
      if (a.slice(0, n).join('/') === b.slice(0, n).join('/')) {
        throw invalid(`artifact input paths ${quoteName(a.join('/'))} and ${quoteName(b.join('/'))} overlap`);
      }
    }
  }
}

/**
 * Stages all inputs in order after validating every reference and path up front (destinations
 * must be distinct and not nested). If one fails, the ones already staged are removed.
 */
export async function stageArtifactInputs(
  store: ArtifactStore,
  inputs: unknown,
  workDir: string,
  opts: StageOptions = {},
): Promise<StagedInput[]> {
  if (inputs === undefined || inputs === null) return [];
  if (!Array.isArray(inputs)) throw invalid('artifactInputs must be a list');
  const list = inputs.map((raw: unknown, i): ArtifactInput => {
    if (typeof raw !== 'object' || raw === null) throw invalid(`artifact input #${i + 1} must be an object`);
    const { artifactRef, path } = raw as Record<string, unknown>;
    validateArtifactRef(artifactRef);
    return { artifactRef, path };
  });
  assertDisjoint(list.map((x) => inputPathSegments(x.path)));
  const staged: StagedInput[] = [];
  const fresh: StagedInput[] = [];
  const created: string[] = [];
  try {
    for (const input of list) {
      const one = await stageOne(store, input, workDir, opts);
      staged.push(one.staged);
      if (one.fresh) fresh.push(one.staged);
      created.push(...one.created);
    }
  } catch (err) {
    // Only what this call wrote is rolled back; a destination that was already there stays.
    for (const s of fresh) await rm(join(workDir, s.path), { recursive: true, force: true }).catch(() => undefined);
    for (const dir of created.reverse()) await rmdir(dir).catch(() => undefined);
    throw err;
  }
  return staged;
}
