/**
 * Deterministic, symlink-refusing directory walk shared by validation and archiving: entries of
 * each directory in byte order of their names, depth first, parents before children (Go's
 * filepath.WalkDir order). Only regular files and directories are allowed.
 */
import { constants } from 'node:fs';
import { lstat, open, readdir } from 'node:fs/promises';
import { ArtifactError, asArtifactError, quoteName, type ArtifactReason } from './errors.ts';
import { isUnsafePathError, MAX_DIR_DEPTH, openChildDir, pinDir, type DirHandle } from './safe-dir.ts';

export interface TreeEntry {
  /** Path relative to the walked root, '/'-separated, no trailing slash. */
  rel: string;
  abs: string;
  kind: 'file' | 'dir';
  size: number;
  mode: number;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Names of a directory in byte order; a name that is not valid UTF-8 is rejected. */
export async function readSortedNames(
  dir: string,
  describe: (name: string) => string,
  reason: ArtifactReason,
): Promise<string[]> {
  let raw: Buffer[];
  try {
    raw = await readdir(dir, { encoding: 'buffer' });
  } catch (err) {
    throw asArtifactError(err, reason, `${describe('')}: cannot read directory`);
  }
  raw.sort((a, b) => Buffer.compare(a, b));
  return raw.map((b) => {
    try {
      return utf8.decode(b);
    } catch {
      throw new ArtifactError(reason, `${describe(b.toString('utf8'))}: name is not valid UTF-8`);
    }
  });
}

export interface WalkOptions {
  /** Prefix of every message, e.g. `artifact "dist"`. */
  label: string;
  reason: ArtifactReason;
}

/**
 * Walks everything below `root` (not `root` itself). `root` itself must not be a link; each
 * directory below it is opened relative to its parent's descriptor (safe-dir.ts), so a directory
 * swapped for a link during the walk is refused, never followed. Entry `abs` paths are valid
 * while the entry is being consumed (they name the parent by its descriptor).
 */
export async function* walkTree(root: string, opts: WalkOptions): AsyncGenerator<TreeEntry> {
  let top: DirHandle;
  try {
    top = await pinDir(await open(root, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW), opts.label);
  } catch (err) {
    throw asArtifactError(err, opts.reason, `${opts.label}: cannot open directory`);
  }
  try {
    yield* walkDir(top, opts, '', 0);
  } finally {
    await top.close().catch(() => undefined);
  }
}

async function openSubdir(
  dir: DirHandle,
  name: string,
  describe: () => string,
  reason: ArtifactReason,
): Promise<DirHandle> {
  try {
    const child = await openChildDir(dir, name);
    if (child) return child;
  } catch (err) {
    if (isUnsafePathError(err) && /symbolic link/.test(err.message))
      throw new ArtifactError(reason, `${describe()}: symbolic links are not allowed`);
    throw asArtifactError(err, reason, `${describe()}: cannot open directory`);
  }
  throw new ArtifactError(reason, `${describe()}: removed while reading`);
}

async function* walkDir(dir: DirHandle, opts: WalkOptions, relDir: string, depth: number): AsyncGenerator<TreeEntry> {
  const describe = (name: string): string => {
    const rel = relDir && name ? `${relDir}/${name}` : relDir || name;
    return rel ? `${opts.label}: ${quoteName(rel)}` : opts.label;
  };
  if (depth >= MAX_DIR_DEPTH)
    throw new ArtifactError(opts.reason, `${describe('')}: nested deeper than ${MAX_DIR_DEPTH} levels`);
  const names = await readSortedNames(dir.path, describe, opts.reason);
  for (const name of names) {
    const rel = relDir ? `${relDir}/${name}` : name;
    const abs = `${dir.path}/${name}`;
    let st;
    try {
      st = await lstat(abs);
    } catch (err) {
      throw asArtifactError(err, opts.reason, `${describe(name)}: cannot inspect`);
    }
    if (st.isSymbolicLink()) throw new ArtifactError(opts.reason, `${describe(name)}: symbolic links are not allowed`);
    if (st.isDirectory()) {
      yield { rel, abs, kind: 'dir', size: 0, mode: st.mode };
      const sub = await openSubdir(dir, name, () => describe(name), opts.reason);
      try {
        yield* walkDir(sub, opts, rel, depth + 1);
      } finally {
        await sub.close().catch(() => undefined);
      }
    } else if (st.isFile()) {
      yield { rel, abs, kind: 'file', size: st.size, mode: st.mode };
    } else {
      throw new ArtifactError(opts.reason, `${describe(name)}: special files are not allowed`);
    }
  }
}
