/**
 * A file artifact opened for storing, the same way for every store: O_NOFOLLOW (a symbolic link
 * is refused, never followed), a regular file only, within the size limit, with its content type
 * sniffed from the first bytes; and the digest stream that enforces the limit while it hashes.
 */
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { SNIFF_BYTES, detectContentType } from './content-type.ts';
import { DigestStream } from './digest.ts';
import { ArtifactError, asArtifactError, errnoCode } from './errors.ts';

export const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

export interface FileSource {
  /** Open for reading from offset 0; the caller closes it. */
  handle: FileHandle;
  contentType: string;
}

/** Opens `path` as a file artifact, or fails ArtifactInvalid with `label` and why (nothing left open). */
export async function openFileSource(path: string, label: string, max: number): Promise<FileSource> {
  let handle: FileHandle;
  try {
    handle = await open(path, READ_FLAGS);
  } catch (err) {
    if (errnoCode(err) === 'ELOOP')
      throw new ArtifactError('ArtifactInvalid', `${label}: symbolic links are not allowed`);
    throw asArtifactError(err, 'ArtifactInvalid', `${label}: cannot open`);
  }
  try {
    const st = await handle.stat();
    if (!st.isFile()) throw new ArtifactError('ArtifactInvalid', `${label}: special files are not allowed`);
    if (st.size > max) throw new ArtifactError('ArtifactInvalid', `${label}: size ${st.size} exceeds ${max} bytes`);
    const head = Buffer.alloc(SNIFF_BYTES);
    const { bytesRead } = await handle.read(head, 0, SNIFF_BYTES, 0);
    return { handle, contentType: detectContentType(path, head.subarray(0, bytesRead)) };
  } catch (err) {
    await handle.close().catch(() => undefined);
    throw err;
  }
}

/** Hashes what passes through and fails ArtifactInvalid once more than `max` bytes did (a file that grew). */
export function limitedDigest(label: string, max: number): DigestStream {
  return new DigestStream(max, () => new ArtifactError('ArtifactInvalid', `${label}: size exceeds ${max} bytes`));
}
