/**
 * openat(2)-style access to directories a Run can write (ADR 0014): every component below a
 * trusted root is opened relative to the descriptor of its parent, with O_NOFOLLOW|O_DIRECTORY,
 * so a symbolic link planted anywhere on the way (or swapped in while runtimed works) is never
 * followed. Node has no openat, so the parent descriptor is named by its /proc/self/fd/<fd> link:
 * the kernel resolves that link to the directory the descriptor holds (wherever it has been
 * moved) and then only the single, checked component below it. Nothing is ever resolved
 * through a path string a Run could have changed.
 */
import { constants, type Stats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { closeFd, drive, op, type Walk } from './fs-ops.ts';
import { errnoCode } from './errors.ts';

/** The stable reason of every refusal of this module; it becomes a Run condition reason. */
export const UNSAFE_PATH = 'UnsafePath';

export class UnsafePathError extends Error {
  readonly reason = UNSAFE_PATH;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'UnsafePathError';
  }
}

export function isUnsafePathError(err: unknown): err is UnsafePathError {
  return err instanceof UnsafePathError;
}

const PROC_FD = '/proc/self/fd';
const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
/** Deepest directory tree the walkers descend into (each level holds one descriptor). */
export const MAX_DIR_DEPTH = 256;

/** An open directory; `path` names it for the lifetime of the handle (never a Run-writable path). */
export interface DirHandle {
  /** /proc/self/fd/<fd>: resolving `${path}/<name>` is openat(fd, name). */
  readonly path: string;
  readonly dev: number;
  readonly ino: number;
  /** For messages: the path as runtimed meant it. */
  readonly shown: string;
  close(): Promise<void>;
}

/** Wraps an open directory descriptor (closed on failure). */
export async function pinDir(fh: FileHandle, shown: string): Promise<DirHandle> {
  try {
    const st = await fh.stat();
    return { path: `${PROC_FD}/${fh.fd}`, dev: st.dev, ino: st.ino, shown, close: () => fh.close() };
  } catch (err) {
    await fh.close().catch(() => undefined);
    throw err;
  }
}

/** A single directory-entry name: not empty, '.', '..', and without '/' or NUL. */
export function isComponent(name: string): boolean {
  return name !== '' && name !== '.' && name !== '..' && !name.includes('/') && !name.includes('\0');
}

/** A directory handle on a descriptor a walk opened; closing it twice closes it once. */
function fdHandle(fd: number, st: Stats, shown: string): DirHandle {
  let open = true;
  // A failed close rejects (the executor's throw).
  const close = (): Promise<void> =>
    new Promise((resolve) => {
      if (open) {
        open = false;
        closeFd(fd);
      }
      resolve();
    });
  return { path: `${PROC_FD}/${fd}`, dev: st.dev, ino: st.ino, shown, close };
}

/** fdHandle for `fd` (closed on failure). */
function* pinFd(fd: number, shown: string): Walk<DirHandle> {
  try {
    return fdHandle(fd, yield* op.fstat(fd), shown);
  } catch (err) {
    closeFd(fd);
    throw err;
  }
}

function* openTrustedDirWalk(path: string): Walk<DirHandle> {
  let fd: number;
  try {
    fd = yield* op.open(path, constants.O_RDONLY | constants.O_DIRECTORY);
  } catch (err) {
    throw new UnsafePathError(`cannot open ${JSON.stringify(path)}: ${errnoCode(err) ?? String(err)}`, { cause: err });
  }
  return yield* pinFd(fd, path);
}

/** Opens a directory runtimed itself owns (its path is trusted and may contain links). */
export function openTrustedDir(path: string): Promise<DirHandle> {
  return drive(openTrustedDirWalk(path));
}

/**
 * A trusted directory opened once and held open (runtimed's workspace root): walks below it start
 * from the held descriptor instead of opening the root again for every Run directory (an open, an
 * fstat and a close per walk). It names the directory it was opened on for as long as it is held.
 */
export class PinnedDir {
  private held: Promise<DirHandle> | undefined;

  constructor(readonly shown: string) {}

  /** The held handle (opened on first use; a failed open is tried again on the next use). Never close it. */
  get(): Promise<DirHandle> {
    this.held ??= openTrustedDir(this.shown).catch((err: unknown) => {
      this.held = undefined;
      throw err;
    });
    return this.held;
  }

  async close(): Promise<void> {
    const h = this.held;
    this.held = undefined;
    if (h) await (await h.catch(() => undefined))?.close().catch(() => undefined);
  }
}

/** lstat of `parent/name`; undefined when it cannot be looked at. */
function* lookAt(parent: DirHandle, name: string): Walk<Stats | undefined> {
  try {
    return yield* op.lstat(`${parent.path}/${name}`);
  } catch {
    return undefined;
  }
}

/** Why `name` below `parent` cannot be opened as a directory, as a message. */
function* refusal(parent: DirHandle, name: string, err: unknown): Walk<UnsafePathError> {
  const shown = JSON.stringify(`${parent.shown}/${name}`);
  const st = yield* lookAt(parent, name);
  if (st?.isSymbolicLink()) return new UnsafePathError(`${shown} is a symbolic link`, { cause: err });
  if (st && !st.isDirectory()) return new UnsafePathError(`${shown} is not a directory`, { cause: err });
  return new UnsafePathError(`cannot open ${shown}: ${errnoCode(err) ?? String(err)}`, { cause: err });
}

export interface OpenBeneathOptions {
  /** Create missing components with this mode. */
  create?: number;
  /** Refuse a component on another device than its parent (a mount point). */
  sameDevice?: boolean;
}

function* openChildDirWalk(parent: DirHandle, name: string, opts: OpenBeneathOptions): Walk<DirHandle | undefined> {
  if (!isComponent(name)) throw new UnsafePathError(`${JSON.stringify(name)} is not a single path component`);
  const child = `${parent.path}/${name}`;
  if (opts.create !== undefined) {
    try {
      yield* op.mkdir(child, opts.create);
    } catch (err) {
      if (errnoCode(err) !== 'EEXIST')
        throw new UnsafePathError(`cannot create ${JSON.stringify(`${parent.shown}/${name}`)}: ${errnoCode(err)}`);
    }
  }
  let fd: number;
  try {
    fd = yield* op.open(child, DIR_FLAGS);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT' && opts.create === undefined) return undefined;
    throw yield* refusal(parent, name, err);
  }
  const dir = yield* pinFd(fd, `${parent.shown}/${name}`);
  if (opts.sameDevice && dir.dev !== parent.dev) {
    closeQuietly(dir);
    throw new UnsafePathError(`${JSON.stringify(dir.shown)} is a mount point`);
  }
  return dir;
}

/** Closes a handle a walk opened (fdHandle: synchronous, never fails the walk). */
function closeQuietly(dir: DirHandle): void {
  dir.close().catch(() => undefined);
}

/** Opens `name` below `parent` without following a link; undefined when it does not exist (and create is unset). */
export function openChildDir(
  parent: DirHandle,
  name: string,
  opts: OpenBeneathOptions = {},
): Promise<DirHandle | undefined> {
  return drive(openChildDirWalk(parent, name, opts));
}

/** openDirBeneath as a walk. */
export function* openDirBeneathWalk(
  root: string | DirHandle,
  segments: readonly string[],
  opts: OpenBeneathOptions = {},
): Walk<DirHandle | undefined> {
  let current = typeof root === 'string' ? yield* openTrustedDirWalk(root) : root;
  let ownsCurrent = typeof root === 'string';
  try {
    for (const segment of segments) {
      const next = yield* openChildDirWalk(current, segment, opts);
      if (ownsCurrent) closeQuietly(current);
      if (!next) return undefined;
      current = next;
      ownsCurrent = true;
    }
  } catch (err) {
    if (ownsCurrent) closeQuietly(current);
    throw err;
  }
  if (!ownsCurrent) throw new UnsafePathError('openDirBeneath needs at least one segment below a handle');
  return current;
}

/**
 * Opens `root/segments…` one component at a time (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS
 * semantics): a link or non-directory on the way is an UnsafePathError. Returns undefined when a
 * component does not exist and `create` is unset. The caller closes the handle.
 */
export function openDirBeneath(
  root: string | DirHandle,
  segments: readonly string[],
  opts: OpenBeneathOptions = {},
): Promise<DirHandle | undefined> {
  return drive(openDirBeneathWalk(root, segments, opts));
}

/** Runs `fn` with `root/segments…` open; undefined (fn not called) when it does not exist. */
export async function withDirBeneath<T>(
  root: string | DirHandle,
  segments: readonly string[],
  opts: OpenBeneathOptions,
  fn: (dir: DirHandle) => Promise<T>,
): Promise<T | undefined> {
  const dir = await openDirBeneath(root, segments, opts);
  if (!dir) return undefined;
  try {
    return await fn(dir);
  } finally {
    await dir.close().catch(() => undefined);
  }
}

function* lstatEntry(parent: DirHandle, name: string): Walk<Stats | undefined> {
  try {
    return yield* op.lstat(`${parent.path}/${name}`);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return undefined;
    throw new UnsafePathError(`cannot inspect ${JSON.stringify(`${parent.shown}/${name}`)}: ${errnoCode(err)}`);
  }
}

/** Removes `name` below `parent` with `remove` (unlink or rmdir); gone already is not an error. */
function* removeName(parent: DirHandle, name: string, how: 'unlink' | 'rmdir'): Walk<void> {
  try {
    yield* op[how](`${parent.path}/${name}`);
  } catch (err) {
    if (errnoCode(err) !== 'ENOENT')
      throw new UnsafePathError(`cannot remove ${JSON.stringify(`${parent.shown}/${name}`)}: ${errnoCode(err)}`);
  }
}

/** What a directory listing says an entry is; undefined when it was not listed (look with lstat). */
type ListedAs = 'dir' | 'other' | undefined;

/** Whether `name` below `parent` is a directory (undefined: gone), from its listing when there is one. */
function* isDirEntry(parent: DirHandle, name: string, listed: ListedAs): Walk<boolean | undefined> {
  if (listed) return listed === 'dir';
  const st = yield* lstatEntry(parent, name);
  return st && st.isDirectory();
}

/**
 * Opens directory `name` below `parent` to empty it; undefined when it was swapped for a link or
 * file since the listing or lstat (remove that instead of following it), null when it is gone.
 */
function* openToEmpty(parent: DirHandle, name: string): Walk<DirHandle | undefined | null> {
  try {
    return yield* openChildDirWalk(parent, name, { sameDevice: true });
  } catch (err) {
    const now = yield* lstatEntry(parent, name);
    if (now && !now.isDirectory()) return undefined;
    if (!now) return null;
    throw err;
  }
}

/**
 * Removes `name` below `parent` and everything under it, never through a link and never across a
 * mount. Entries of a listed directory come with their type (readdir's d_type), so only an entry
 * that changed since the listing costs an lstat.
 */
function* removeEntry(parent: DirHandle, name: string, depth: number, listed?: ListedAs): Walk<void> {
  const isDir = yield* isDirEntry(parent, name, listed);
  if (isDir === undefined) return;
  if (!isDir) {
    try {
      yield* removeName(parent, name, 'unlink');
    } catch (err) {
      // Listed as a file but a directory now: look again.
      if (!listed || !isUnsafePathError(err)) throw err;
      yield* removeEntry(parent, name, depth);
    }
    return;
  }
  if (depth >= MAX_DIR_DEPTH)
    throw new UnsafePathError(
      `${JSON.stringify(`${parent.shown}/${name}`)}: nested deeper than ${MAX_DIR_DEPTH} levels`,
    );
  const dir = yield* openToEmpty(parent, name);
  if (dir === null) return;
  if (!dir) {
    yield* removeName(parent, name, 'unlink');
    return;
  }
  try {
    for (const child of yield* op.readdir(dir.path))
      yield* removeEntry(dir, child.name, depth + 1, child.dir ? 'dir' : 'other');
  } finally {
    closeQuietly(dir);
  }
  yield* removeName(parent, name, 'rmdir');
}

/** removeBeneath as a walk. */
export function* removeBeneathWalk(root: string | DirHandle, segments: readonly string[]): Walk<void> {
  if (segments.length === 0) throw new UnsafePathError('refusing to remove the root itself');
  const last = segments[segments.length - 1] as string;
  if (!isComponent(last)) throw new UnsafePathError(`${JSON.stringify(last)} is not a single path component`);
  const parents = segments.slice(0, -1);
  const top = typeof root === 'string' ? yield* openTrustedDirWalk(root) : root;
  try {
    if (parents.length === 0) {
      yield* removeEntry(top, last, 0);
      return;
    }
    const parent = yield* openDirBeneathWalk(top, parents, { sameDevice: true });
    if (!parent) return;
    try {
      yield* removeEntry(parent, last, 0);
    } finally {
      closeQuietly(parent);
    }
  } finally {
    if (typeof root === 'string') closeQuietly(top);
  }
}

/**
 * Removes `root/segments…` (the last segment and all below it, like `rm -rf`) without following a
 * link in any component, without descending into a mount point and without leaving `root`.
 * A missing path is not an error; a link as the last segment is removed itself.
 */
export function removeBeneath(root: string | DirHandle, segments: readonly string[]): Promise<void> {
  return drive(removeBeneathWalk(root, segments));
}
