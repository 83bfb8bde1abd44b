/**
 * Deterministic, symlink-refusing directory walk shared by validation and archiving: entries of
 * each directory in byte order of their names, depth first, parents before children (Go's
 * filepath.WalkDir order). Only regular files and directories are allowed.
 */
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { ArtifactError, asArtifactError, quoteName, type ArtifactReason } from './errors.ts';

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

/** Walks everything below `root` (not `root` itself). */
export async function* walkTree(root: string, opts: WalkOptions, relDir = ''): AsyncGenerator<TreeEntry> {
  const describe = (name: string): string => {
    const rel = relDir && name ? `${relDir}/${name}` : relDir || name;
    return rel ? `${opts.label}: ${quoteName(rel)}` : opts.label;
  };
  const names = await readSortedNames(relDir ? join(root, relDir) : root, describe, opts.reason);
  for (const name of names) {
    const rel = relDir ? `${relDir}/${name}` : name;
    const abs = join(root, rel);
    let st;
    try {
      st = await lstat(abs);
    } catch (err) {
      throw asArtifactError(err, opts.reason, `${describe(name)}: cannot inspect`);
    }
    if (st.isSymbolicLink()) throw new ArtifactError(opts.reason, `${describe(name)}: symbolic links are not allowed`);
    if (st.isDirectory()) {
      yield { rel, abs, kind: 'dir', size: 0, mode: st.mode };
      yield* walkTree(root, opts, rel);
    } else if (st.isFile()) {
      yield { rel, abs, kind: 'file', size: st.size, mode: st.mode };
    } else {
      throw new ArtifactError(opts.reason, `${describe(name)}: special files are not allowed`);
    }
  }
}
