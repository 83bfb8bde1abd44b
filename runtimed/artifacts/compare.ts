/**
 * Content comparison for idempotent artifact staging: re-staging an input whose destination
 * already holds exactly the artifact's content (a second step of the same job, an in-place retry)
 * succeeds; anything else at the destination is a conflict. Symlinks and special files never
 * compare equal, so nothing is followed.
 */
import { createReadStream } from 'node:fs';
import { lstat } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import type { ArtifactReason } from './errors.ts';
import { walkTree, type TreeEntry } from './walk.ts';

async function fileDigest(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path, { flags: 'r' })) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

interface Listed {
  rel: string;
  kind: TreeEntry['kind'];
  /** sha256 of a file's bytes, read while the walk holds its directory (entry paths are only valid then). */
  digest?: string;
}

async function listTree(root: string): Promise<Listed[] | undefined> {
  const opts = { label: 'existing destination', reason: 'ArtifactInputInvalid' as ArtifactReason };
  const entries: Listed[] = [];
  try {
    for await (const e of walkTree(root, opts))
      entries.push({ rel: e.rel, kind: e.kind, ...(e.kind === 'file' ? { digest: await fileDigest(e.abs) } : {}) });
  } catch {
    return undefined; // a symlink, special file or unreadable entry: not the artifact's content
  }
  return entries;
}

async function sameFiles(a: string, b: string): Promise<boolean> {
  const [sa, sb] = await Promise.all([lstat(a), lstat(b)]);
  if (!sa.isFile() || !sb.isFile() || sa.size !== sb.size) return false;
  return (await fileDigest(a)) === (await fileDigest(b));
}

async function sameDirectories(existing: string, fresh: string): Promise<boolean> {
  const st = await lstat(existing);
  if (!st.isDirectory()) return false;
  const [a, b] = await Promise.all([listTree(existing), listTree(fresh)]);
  if (!a || !b || a.length !== b.length) return false;
  return a.every((x, i) => x.rel === b[i]?.rel && x.kind === b[i]?.kind && x.digest === b[i]?.digest);
}

/** Whether `existing` holds the same content as the freshly staged `fresh` (file bytes, or tree shape and file bytes). */
export async function sameContent(existing: string, fresh: string, kind: 'file' | 'directory'): Promise<boolean> {
  try {
    return kind === 'directory' ? await sameDirectories(existing, fresh) : await sameFiles(existing, fresh);
  } catch {
    return false;
  }
}
