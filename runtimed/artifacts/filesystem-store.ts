/**
 * Filesystem ArtifactStore on a PVC mounted into runtimed (upstream §2.5). Layout under the root:
 * `namespaces/<ns>/runs/<runUID>/<name>`; parents are created component by component without
 * following symlinks; content goes to `.artifact-*` then is renamed into place (a repeated put
 * replaces the previous value); directories are stored as their deterministic tar.gz.
 */
import { constants } from 'node:fs';
import { mkdir, mkdtemp, open, realpath, rename, rm } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { archiveDirectory } from './archive.ts';
import { READ_FLAGS, limitedDigest, openFileSource } from './file-source.ts';
import { ArtifactError, asArtifactError, errnoCode, quoteName } from './errors.ts';
import { directoriesExist, mkdirBeneath } from './safe-path.ts';
import {
  DIRECTORY_CONTENT_TYPE,
  createdAtNow,
  putOptions,
  type ArtifactRef,
  type ArtifactStore,
  type ArtifactType,
  type OpenScope,
  type PutOptions,
} from './store.ts';
import {
  DEFAULT_MAX_ARTIFACT_BYTES,
  assertPathComponent,
  inspectSource,
  runArtifactPath,
  validateArtifactRef,
} from './validate.ts';

export const DEFAULT_FILESYSTEM_ROOT = '/var/lib/kruntimes/artifacts';

export interface FilesystemStoreOptions {
  /** Absolute store root (the PVC mount). */
  root: string;
  volumeClaimName: string;
  /** Hard per-artifact bound on stored bytes. */
  maxArtifactBytes?: number;
  now?: () => Date;
}

interface Stored {
  sizeBytes: number;
  digest: string;
  contentType: string;
}

const CREATE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

export class FilesystemArtifactStore implements ArtifactStore {
  readonly driver = 'filesystem' as const;

  private constructor(
    readonly root: string,
    readonly volumeClaimName: string,
    private readonly maxArtifactBytes: number,
    private readonly now: () => Date,
  ) {}

  /** Creates the root if needed and resolves it once (the root itself may be reached through a symlink). */
  static async create(opts: FilesystemStoreOptions): Promise<FilesystemArtifactStore> {
    const invalid = (m: string): ArtifactError => new ArtifactError('ArtifactStoreConfigInvalid', m);
    if (!opts.root || !isAbsolute(opts.root)) throw invalid('artifact store root must be an absolute path');
    if (!opts.volumeClaimName) throw invalid('artifact volume claim name is required');
    const max = opts.maxArtifactBytes ?? DEFAULT_MAX_ARTIFACT_BYTES;
    if (!(max > 0)) throw invalid('max artifact bytes must be positive');
    try {
      await mkdir(opts.root, { recursive: true, mode: 0o750 });
      const root = await realpath(opts.root);
      return new FilesystemArtifactStore(root, opts.volumeClaimName, max, opts.now ?? ((): Date => new Date()));
    } catch (err) {
      throw asArtifactError(err, 'ArtifactStoreError', 'cannot prepare artifact store root');
    }
  }

  async put(
    namespace: string,
    runUID: string,
    name: string,
    localPath: string,
    type: ArtifactType | PutOptions,
  ): Promise<ArtifactRef> {
    const o = putOptions(type);
    const path = runArtifactPath(namespace, runUID, name);
    const label = `artifact ${quoteName(name)}`;
    const actual = await inspectSource(localPath, label);
    if (actual !== o.type)
      throw new ArtifactError('ArtifactInvalid', `${label}: type "${o.type}" does not match source type "${actual}"`);
    const max = Math.min(o.maxSizeBytes || this.maxArtifactBytes, this.maxArtifactBytes);
    const { path: parent } = await mkdirBeneath(
      this.root,
      ['namespaces', namespace, 'runs', runUID],
      'ArtifactStoreError',
    );
    let tmpDir: string | undefined;
    try {
      tmpDir = await mkdtemp(join(parent, '.artifact-'));
      const tmp = join(tmpDir, 'content');
      const stored =
        actual === 'file'
          ? await copyFile(localPath, tmp, label, max)
          : await storeDirectory(localPath, tmp, label, { max, maxSource: this.maxArtifactBytes });
      const dest = join(parent, name);
      await rm(dest, { recursive: true, force: true });
      await rename(tmp, dest);
      return {
        name,
        driver: 'filesystem',
        type: actual,
        sizeBytes: stored.sizeBytes,
        digest: stored.digest,
        contentType: stored.contentType,
        createdAt: createdAtNow(this.now()),
        location: { filesystem: { path, volumeClaimName: this.volumeClaimName } },
      };
    } catch (err) {
      throw asArtifactError(err, 'ArtifactStoreError', `${label}: cannot store`);
    } finally {
      if (tmpDir) await rm(tmpDir, { recursive: true, force: true }).catch(() => undefined);
    }
  }

  /** Resolves a reference to its absolute path, refusing references this store does not own. */
  private locate(ref: ArtifactRef, scope?: OpenScope): { segments: string[]; label: string } {
    const r = validateArtifactRef(ref);
    const label = `artifact ${quoteName(r.name)}`;
    const fail = (m: string): never => {
      throw new ArtifactError('ArtifactInputInvalid', `${label}: ${m}`);
    };
    if (r.driver !== 'filesystem' || !r.location.filesystem) return fail('not a filesystem artifact');
    const claim = r.location.filesystem.volumeClaimName;
    if (claim && claim !== this.volumeClaimName)
      fail(`belongs to volume claim ${quoteName(claim)}, not ${quoteName(this.volumeClaimName)}`);
    const segments = r.location.filesystem.path.split('/');
    if (segments.length !== 5 || segments[0] !== 'namespaces' || segments[2] !== 'runs')
      fail('location is outside the artifact store layout');
    if (scope && segments[1] !== scope.namespace)
      fail(`location belongs to another namespace than ${quoteName(scope.namespace)}`);
    return { segments, label };
  }

  async open(ref: ArtifactRef, scope?: OpenScope): Promise<Readable> {
    const { segments, label } = this.locate(ref, scope);
    const notFound = (): ArtifactError =>
      new ArtifactError('ArtifactNotFound', `${label} was not found in the artifact store`);
    if (!(await directoriesExist(this.root, segments.slice(0, -1), 'ArtifactInputInvalid'))) throw notFound();
    let fh;
    try {
      fh = await open(join(this.root, ...segments), READ_FLAGS);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') throw notFound();
      if (errnoCode(err) === 'ELOOP')
        throw new ArtifactError('ArtifactInputInvalid', `${label}: stored object is a symbolic link`);
      throw asArtifactError(err, 'ArtifactStoreError', `${label}: cannot open`);
    }
    const st = await fh.stat().catch(async (err: unknown) => {
      await fh.close();
      throw asArtifactError(err, 'ArtifactStoreError', `${label}: cannot open`);
    });
    if (!st.isFile()) {
      await fh.close();
      throw new ArtifactError('ArtifactInputInvalid', `${label}: stored object is not a regular file`);
    }
    return fh.createReadStream();
  }

  async deleteRun(namespace: string, runUID: string): Promise<void> {
    assertPathComponent(namespace, 'run namespace');
    assertPathComponent(runUID, 'run UID');
    const segments = ['namespaces', namespace, 'runs', runUID];
    if (!(await directoriesExist(this.root, segments, 'ArtifactStoreError'))) return;
    try {
      await rm(join(this.root, ...segments), { recursive: true, force: true });
    } catch (err) {
      throw asArtifactError(err, 'ArtifactStoreError', `cannot delete artifacts of Run ${quoteName(runUID)}`);
    }
  }
}

async function copyFile(src: string, dest: string, label: string, max: number): Promise<Stored> {
  const { handle, contentType } = await openFileSource(src, label, max);
  try {
    const digest = limitedDigest(label, max);
    const out = await open(dest, CREATE_FLAGS, 0o640);
    await pipeline(handle.createReadStream({ start: 0, autoClose: false }), digest, out.createWriteStream());
    return { sizeBytes: digest.bytes, digest: digest.digest(), contentType };
  } finally {
    await handle.close().catch(() => undefined);
  }
}

async function storeDirectory(
  src: string,
  dest: string,
  label: string,
  lim: { max: number; maxSource: number },
): Promise<Stored> {
  const r = await archiveDirectory(src, dest, { label, maxStoredBytes: lim.max, maxSourceBytes: lim.maxSource });
  return { ...r, contentType: DIRECTORY_CONTENT_TYPE };
}
