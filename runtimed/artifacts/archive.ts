/**
 * Deterministic tar.gz of a directory artifact (upstream ArchiveDirectory): entries in walk order
 * (byte-sorted names, parents first), names relative with '/' and a trailing '/' for
 * directories, mtime 0, uid/gid 0, no uname/gname, no PAX records, modes normalised to
 * 0755/0644; gzip header mtime 0 and OS 255. Identical trees give identical bytes whatever the
 * file timestamps, owners or creation order. Symlinks and special files are rejected.
 */
import { constants } from 'node:fs';
import { lstat, open, rm } from 'node:fs/promises';
import { Readable, Transform, type TransformCallback, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { DigestStream } from './digest.ts';
import { ArtifactError, asArtifactError, quoteName, type ArtifactReason } from './errors.ts';
import { END_OF_ARCHIVE, encodeHeader, paddingFor } from './tar.ts';
import { DEFAULT_MAX_ARCHIVE_ENTRIES } from './validate.ts';
import { walkTree, type TreeEntry } from './walk.ts';

export interface ArchiveOptions {
  /** Prefix of error messages, e.g. `artifact "dist"`. */
  label?: string;
  /** Most files+directories allowed in the tree. */
  maxEntries?: number;
  /** Most source bytes (sum of file sizes) allowed. */
  maxSourceBytes?: number;
  /** Reason for rejected content; ArtifactInvalid by default. */
  reason?: ArtifactReason;
}

const READ_CHUNK = 64 * 1024;

export function normalizedMode(kind: 'file' | 'dir', mode: number): number {
  return kind === 'dir' || (mode & 0o100) !== 0 ? 0o755 : 0o644;
}

async function* fileBlocks(e: TreeEntry, label: string, reason: ArtifactReason): AsyncGenerator<Buffer> {
  const name = quoteName(e.rel);
  let fh;
  try {
    fh = await open(e.abs, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    throw asArtifactError(err, reason, `${label}: ${name}: cannot open`);
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new ArtifactError(reason, `${label}: ${name}: special files are not allowed`);
    yield encodeHeader({ name: e.rel, kind: 'file', mode: normalizedMode('file', st.mode), size: st.size });
    let left = st.size;
    while (left > 0) {
      const buf = Buffer.allocUnsafe(Math.min(READ_CHUNK, left));
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) throw new ArtifactError(reason, `${label}: ${name}: file changed while archiving`);
      left -= bytesRead;
      yield bytesRead === buf.length ? buf : buf.subarray(0, bytesRead);
    }
    const pad = paddingFor(st.size);
    if (pad > 0) yield Buffer.alloc(pad);
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/** The uncompressed tar stream of everything below `root`, ending with the end-of-archive marker. */
export async function* tarBlocks(root: string, opts: ArchiveOptions = {}): AsyncGenerator<Buffer> {
  const label = opts.label ?? 'directory';
  const reason = opts.reason ?? 'ArtifactInvalid';
  const maxEntries = opts.maxEntries ?? DEFAULT_MAX_ARCHIVE_ENTRIES;
  const maxBytes = opts.maxSourceBytes ?? Infinity;
  let st;
  try {
    st = await lstat(root);
  } catch (err) {
    throw asArtifactError(err, reason, `${label}: cannot inspect`);
  }
  if (!st.isDirectory()) throw new ArtifactError(reason, `${label}: source is not a directory`);
  let entries = 0;
  let bytes = 0;
  for await (const e of walkTree(root, { label, reason })) {
    if (++entries > maxEntries) throw new ArtifactError(reason, `${label}: more than ${maxEntries} entries`);
    if (e.kind === 'dir') {
      yield encodeHeader({ name: `${e.rel}/`, kind: 'dir', mode: 0o755, size: 0 });
      continue;
    }
    bytes += e.size;
    if (bytes > maxBytes) throw new ArtifactError(reason, `${label}: size exceeds ${maxBytes} bytes`);
    yield* fileBlocks(e, label, reason);
  }
  yield END_OF_ARCHIVE;
}

/** Sets the gzip header OS byte (offset 9) to 255 ("unknown"), as Go's writer does. */
class GzipOsByte extends Transform {
  private offset = 0;

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    let out = chunk;
    if (this.offset <= 9 && this.offset + chunk.length > 9) {
      out = Buffer.from(chunk);
      out[9 - this.offset] = 0xff;
    }
    this.offset += chunk.length;
    cb(null, out);
  }
}

/** Streams the deterministic tar.gz of `root` into `sink`. zlib leaves the gzip mtime at 0. */
export async function writeArchive(root: string, sink: Writable, opts: ArchiveOptions = {}): Promise<void> {
  await pipeline(Readable.from(tarBlocks(root, opts), { objectMode: false }), createGzip(), new GzipOsByte(), sink);
}

export interface ArchiveResult {
  sizeBytes: number;
  digest: string;
}

/**
 * Writes the tar.gz of `root` to a new file `outPath` (never an existing path or a symlink) and
 * returns its size and sha256. `maxStoredBytes` bounds the compressed size. On failure the
 * partial file is removed.
 */
export async function archiveDirectory(
  root: string,
  outPath: string,
  opts: ArchiveOptions & { maxStoredBytes?: number } = {},
): Promise<ArchiveResult> {
  const label = opts.label ?? 'directory';
  const max = opts.maxStoredBytes ?? Infinity;
  const digest = new DigestStream(
    max,
    () => new ArtifactError(opts.reason ?? 'ArtifactInvalid', `${label}: stored size exceeds ${max} bytes`),
  );
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
  let created = false;
  try {
    const fh = await open(outPath, flags, 0o600);
    created = true;
    const out = fh.createWriteStream();
    await pipeline(
      Readable.from(tarBlocks(root, opts), { objectMode: false }),
      createGzip(),
      new GzipOsByte(),
      digest,
      out,
    );
  } catch (err) {
    // Only remove what this call created: O_EXCL refuses to touch an existing path.
    if (created) await rm(outPath, { force: true }).catch(() => undefined);
    throw asArtifactError(err, 'ArtifactStoreError', `${label}: cannot write archive`);
  }
  return { sizeBytes: digest.bytes, digest: digest.digest() };
}
