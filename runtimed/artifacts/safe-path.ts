/** Walking below a trusted root one component at a time, never through a symlink (each component is lstat'ed). */
import { lstat, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { ArtifactError, asArtifactError, errnoCode, quoteName, type ArtifactReason } from './errors.ts';

async function lstatOrUndefined(path: string, reason: ArtifactReason): Promise<import('node:fs').Stats | undefined> {
  try {
    return await lstat(path);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return undefined;
    throw asArtifactError(err, reason, `cannot inspect ${quoteName(path)}`);
  }
}

function assertRealDirectory(st: import('node:fs').Stats, path: string, reason: ArtifactReason): void {
  if (st.isSymbolicLink()) throw new ArtifactError(reason, `path ${quoteName(path)} is a symbolic link`);
  if (!st.isDirectory()) throw new ArtifactError(reason, `path ${quoteName(path)} is not a directory`);
}

/**
 * Creates `root/segments…` component by component; an existing symlink or file on the way is an
 * error. Returns the final path and the directories this call created (outermost first).
 */
export async function mkdirBeneath(
  root: string,
  segments: string[],
  reason: ArtifactReason,
  mode = 0o750,
): Promise<{ path: string; created: string[] }> {
  let current = root;
  const created: string[] = [];
  for (const segment of segments) {
    current = join(current, segment);
    let st = await lstatOrUndefined(current, reason);
    if (!st) {
      try {
        await mkdir(current, { mode });
        created.push(current);
      } catch (err) {
        if (errnoCode(err) !== 'EEXIST') throw asArtifactError(err, reason, `cannot create ${quoteName(current)}`);
      }
      st = await lstat(current);
    }
    assertRealDirectory(st, current, reason);
  }
  return { path: current, created };
}

/**
 * Checks that `root/segments…` are real directories (no symlinks). Returns false when one of
 * them does not exist.
 */
export async function directoriesExist(root: string, segments: string[], reason: ArtifactReason): Promise<boolean> {
  let current = root;
  for (const segment of segments) {
    current = join(current, segment);
    const st = await lstatOrUndefined(current, reason);
    if (!st) return false;
    assertRealDirectory(st, current, reason);
  }
  return true;
}
