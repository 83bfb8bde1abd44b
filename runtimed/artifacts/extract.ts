/**
 * Safe staging of artifact inputs (seed 000): directory archives are extracted into a fresh
 * private directory next to the destination and renamed into place only after every entry was
 * accepted, so a rejected archive leaves nothing behind. Only regular files and directories with
 * clean relative paths are accepted: symlinks, hard links, devices, FIFOs, absolute paths, '..'
 * segments, duplicates and oversized archives are rejected with ArtifactInputInvalid and a
 * message naming the entry. Files are written O_EXCL|O_NOFOLLOW and never follow a link.
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { chmod, lstat, mkdir, mkdtemp, open, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { pipeline as pipelineCb, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { DigestStream } from './digest.ts';
import { ArtifactError, asArtifactError, describeError, errnoCode, quoteName } from './errors.ts';
import { BLOCK, decodeHeader, isZeroBlock, paddingFor, parsePax, type DecodedHeader } from './tar.ts';
import { DEFAULT_MAX_ARCHIVE_ENTRIES, DEFAULT_MAX_ARTIFACT_BYTES } from './validate.ts';

export interface ExtractLimits {
  /** Most entries (files and directories) in one archive. */
  maxEntries: number;
  /** Most file content bytes after decompression (zip-bomb guard). */
  maxBytes: number;
}

export const DEFAULT_EXTRACT_LIMITS: Readonly<ExtractLimits> = Object.freeze({
  maxEntries: DEFAULT_MAX_ARCHIVE_ENTRIES,
  maxBytes: DEFAULT_MAX_ARTIFACT_BYTES,
});

/** Bounds of metadata: a GNU long name or PAX header, and zero padding after the end marker. */
const MAX_META_BYTES = 64 * 1024;
const MAX_TRAILING_BYTES = 1024 * 1024;
const MAX_PATH_BYTES = 4096;
const MAX_SEGMENT_BYTES = 255;

const invalid = (message: string): ArtifactError => new ArtifactError('ArtifactInputInvalid', message);
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Pull-based reader of the decompressed stream; it never buffers more than one upstream chunk ahead. */
class ByteReader {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private ended = false;

  constructor(private readonly it: AsyncIterator<unknown>) {}

  private async fill(): Promise<boolean> {
    if (this.ended) return false;
    const r = await this.it.next();
    if (r.done) {
      this.ended = true;
      return false;
    }
    const chunk = r.value as Buffer;
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    return true;
  }

  /** Exactly n bytes; undefined at a clean end of stream; throws when the stream ends mid-way. */
  async readExact(n: number): Promise<Buffer | undefined> {
    while (this.buffered < n) {
      if (!(await this.fill())) {
        if (this.buffered === 0) return undefined;
        throw invalid('archive is truncated');
      }
    }
    const parts: Buffer[] = [];
    for await (const part of this.take(n)) parts.push(part);
    return Buffer.concat(parts, n);
  }

  /** Yields the next n bytes in pieces. */
  async *take(n: number): AsyncGenerator<Buffer> {
    let left = n;
    while (left > 0) {
      if (this.buffered === 0 && !(await this.fill())) throw invalid('archive is truncated');
      const head = this.chunks[0] as Buffer;
      const piece = head.length <= left ? head : head.subarray(0, left);
      if (piece === head) this.chunks.shift();
      else this.chunks[0] = head.subarray(left);
      this.buffered -= piece.length;
      left -= piece.length;
      yield piece;
    }
  }

  async skip(n: number): Promise<void> {
    for await (const _ of this.take(n)) {
      /* discard */
    }
  }

  /** After the end marker only zero padding (bounded) may follow. */
  async drainZeros(max: number): Promise<void> {
    let seen = 0;
    for (;;) {
      if (this.buffered === 0 && !(await this.fill())) return;
      const chunk = this.chunks.shift() as Buffer;
      this.buffered -= chunk.length;
      seen += chunk.length;
      if (seen > max || !isZeroBlock(chunk)) throw invalid('unexpected data after the end-of-archive marker');
    }
  }
}

const FILE_TYPES = new Set(['0', '\0', '7']);
const REJECTED_TYPES: Record<string, string> = {
  '1': 'hard links are not allowed',
  '2': 'symbolic links are not allowed',
  '3': 'character devices are not allowed',
  '4': 'block devices are not allowed',
  '6': 'FIFOs are not allowed',
  K: 'link entries are not allowed',
  g: 'global extended headers are not supported',
};

function entryKind(typeflag: string, label: string): 'file' | 'dir' {
  if (FILE_TYPES.has(typeflag)) return 'file';
  if (typeflag === '5') return 'dir';
  const why = REJECTED_TYPES[typeflag] ?? `unsupported entry type ${JSON.stringify(typeflag)}`;
  throw invalid(`${label}: ${why}`);
}

/** Validates an entry name and returns its clean segments (empty for the archive root "./"). */
export function entrySegments(name: string, root: string): string[] {
  const label = `entry ${quoteName(name)}`;
  if (name === '') throw invalid('archive entry has an empty name');
  if (name.includes('\0')) throw invalid(`${label}: name contains NUL`);
  if (name.includes('\\')) throw invalid(`${label}: backslashes are not allowed`);
  if (name.startsWith('/')) throw invalid(`${label}: absolute paths are not allowed`);
  const segments = name.split('/').filter((s) => s !== '' && s !== '.');
  if (segments.includes('..')) throw invalid(`${label}: ".." path segments are not allowed`);
  if (Buffer.byteLength(name) > MAX_PATH_BYTES || segments.some((s) => Buffer.byteLength(s) > MAX_SEGMENT_BYTES)) {
    throw invalid(`${label}: path is too long`);
  }
  if (segments.length === 0) return segments;
  const rel = relative(root, resolve(root, ...segments));
  if (rel === '' || rel.startsWith('..') || isAbsolute(rel))
    throw invalid(`${label}: path resolves outside the destination`);
  return segments;
}

interface Pending {
  longName?: Buffer;
  pax?: Map<string, Buffer>;
}

/** Extracts entries into `root` (a fresh private directory). */
class Extractor {
  private readonly explicit = new Set<string>();
  private readonly dirs = new Set<string>();
  private pending: Pending = {};
  private headers = 0;
  entries = 0;
  bytes = 0;

  constructor(
    private readonly root: string,
    private readonly limits: ExtractLimits,
    private readonly reader: ByteReader,
  ) {}

  async run(): Promise<void> {
    for (;;) {
      const block = await this.reader.readExact(BLOCK);
      if (!block) throw invalid('archive ends without an end-of-archive marker');
      if (isZeroBlock(block)) return this.finish();
      const h = decodeHeader(block);
      if (typeof h === 'string') throw invalid(`archive entry #${this.headers + 1}: ${h}`);
      this.headers++;
      await this.handle(h);
    }
  }

  private async finish(): Promise<void> {
    if (this.pending.longName || this.pending.pax) throw invalid('archive ends with a dangling extended header');
    const second = await this.reader.readExact(BLOCK);
    if (second && !isZeroBlock(second)) throw invalid('unexpected data after the end-of-archive marker');
    await this.reader.drainZeros(MAX_TRAILING_BYTES);
  }

  private async readMeta(h: DecodedHeader, what: string): Promise<Buffer> {
    if (h.size > MAX_META_BYTES)
      throw invalid(`archive entry #${this.headers}: ${what} exceeds ${MAX_META_BYTES} bytes`);
    const data = (await this.reader.readExact(h.size)) ?? Buffer.alloc(0);
    await this.reader.skip(paddingFor(h.size));
    return data;
  }

  private async handle(h: DecodedHeader): Promise<void> {
    if (h.typeflag === 'L' || h.typeflag === 'x') {
      const key = h.typeflag === 'L' ? 'longName' : 'pax';
      if (this.pending[key]) throw invalid(`archive entry #${this.headers}: repeated extended header`);
      const data = await this.readMeta(h, 'extended header');
      if (key === 'longName') this.pending.longName = data;
      else this.pending.pax = parsePaxOrThrow(data, this.headers);
      return;
    }
    const { name, size } = this.resolveEntry(h);
    const label = `entry ${quoteName(name)}`;
    const kind = entryKind(h.typeflag, label);
    if (++this.entries > this.limits.maxEntries)
      throw invalid(`archive has more than ${this.limits.maxEntries} entries`);
    const segments = entrySegments(name, this.root);
    const key = segments.join('/');
    if (segments.length === 0 && kind === 'file') throw invalid(`${label}: not a valid file path`);
    if (kind === 'dir' && size !== 0) throw invalid(`${label}: directory entry has content`);
    if (segments.length > 0 && this.explicit.has(key)) throw invalid(`${label}: duplicate entry`);
    this.explicit.add(key);
    if (kind === 'dir') return this.ensureDirs(segments, label);
    this.bytes += size;
    if (this.bytes > this.limits.maxBytes) throw invalid(`archive content exceeds ${this.limits.maxBytes} bytes`);
    await this.ensureDirs(segments.slice(0, -1), label);
    await this.writeFile(segments, size, h.mode, label);
    await this.reader.skip(paddingFor(size));
  }

  private resolveEntry(h: DecodedHeader): { name: string; size: number } {
    const { longName, pax } = this.pending;
    this.pending = {};
    const paxPath = pax?.get('path');
    const longEnd = longName ? longName.indexOf(0) : -1;
    const raw = paxPath ?? (longName && longEnd !== -1 ? longName.subarray(0, longEnd) : longName) ?? h.path;
    let name: string;
    try {
      name = utf8.decode(raw);
    } catch {
      throw invalid(`archive entry #${this.headers}: name is not valid UTF-8`);
    }
    const paxSize = pax?.get('size');
    if (paxSize === undefined) return { name, size: h.size };
    const size = Number(paxSize.toString('latin1'));
    if (!/^\d+$/.test(paxSize.toString('latin1')) || !Number.isSafeInteger(size))
      throw invalid(`entry ${quoteName(name)}: malformed size`);
    return { name, size };
  }

  private async ensureDirs(segments: string[], label: string): Promise<void> {
    for (let i = 1; i <= segments.length; i++) {
      const key = segments.slice(0, i).join('/');
      if (this.dirs.has(key)) continue;
      const path = join(this.root, ...segments.slice(0, i));
      try {
        await mkdir(path, { mode: 0o755 });
      } catch (err) {
        if (errnoCode(err) !== 'EEXIST')
          throw asArtifactError(err, 'ArtifactInputInvalid', `${label}: cannot create directory`);
        const st = await lstat(path);
        if (!st.isDirectory()) throw invalid(`${label}: conflicts with file ${quoteName(key)}`);
      }
      await chmod(path, 0o755);
      this.dirs.add(key);
    }
  }

  private async writeFile(segments: string[], size: number, mode: number, label: string): Promise<void> {
    const path = join(this.root, ...segments);
    const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
    let fh;
    try {
      fh = await open(path, flags, 0o600);
    } catch (err) {
      if (errnoCode(err) === 'EEXIST') throw invalid(`${label}: conflicts with an existing directory`);
      throw asArtifactError(err, 'ArtifactInputInvalid', `${label}: cannot create file`);
    }
    try {
      for await (const piece of this.reader.take(size)) {
        let off = 0;
        while (off < piece.length) off += (await fh.write(piece, off)).bytesWritten;
      }
      await fh.chmod((mode & 0o111) !== 0 ? 0o755 : 0o644);
    } finally {
      await fh.close().catch(() => undefined);
    }
  }
}

function parsePaxOrThrow(data: Buffer, index: number): Map<string, Buffer> {
  try {
    return parsePax(data);
  } catch (err) {
    throw invalid(`archive entry #${index}: ${describeError(err)}`);
  }
}

function mapExtractError(err: unknown): ArtifactError {
  if (err instanceof ArtifactError) return err;
  const code = errnoCode(err);
  if (code?.startsWith('Z_'))
    return new ArtifactError('ArtifactInputInvalid', `archive is not a valid gzip stream: ${describeError(err)}`, {
      cause: err,
    });
  return asArtifactError(err, 'ArtifactInputInvalid', 'cannot extract archive');
}

async function assertFreeDestination(dest: string, shown: string): Promise<void> {
  try {
    await lstat(dest);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return assertDirectory(dirname(dest), shown);
    throw asArtifactError(err, 'ArtifactInputInvalid', `destination ${quoteName(shown)}`);
  }
  throw invalid(`destination ${quoteName(shown)} already exists`);
}

/** The destination's parent is the caller's (stage.ts creates it without symlinks); it may itself be reached through one. */
async function assertDirectory(dir: string, shown: string): Promise<void> {
  const st = await stat(dir).catch((err: unknown) => {
    throw asArtifactError(err, 'ArtifactInputInvalid', `parent of destination ${quoteName(shown)}`);
  });
  if (!st.isDirectory()) throw invalid(`parent of destination ${quoteName(shown)} is not a directory`);
}

export interface ExtractResult {
  entries: number;
  bytes: number;
}

/**
 * Extracts the tar.gz at `tgzPath` so that `destDir` (which must not exist) becomes the archive's
 * root directory. All-or-nothing: on any rejection nothing is left at `destDir` or beside it.
 */
export async function extractArchive(
  tgzPath: string,
  destDir: string,
  limits: Partial<ExtractLimits> = {},
): Promise<ExtractResult> {
  const lim: ExtractLimits = { ...DEFAULT_EXTRACT_LIMITS, ...limits };
  const dest = resolve(destDir);
  await assertFreeDestination(dest, destDir);
  const source = await open(tgzPath, constants.O_RDONLY | constants.O_NOFOLLOW).catch((err: unknown) => {
    throw asArtifactError(err, 'ArtifactInputInvalid', 'cannot open archive');
  });
  const tmp = await mkdtemp(join(dirname(dest), '.kruntimes-extract-')).catch(async (err: unknown) => {
    await source.close();
    throw asArtifactError(
      err,
      'ArtifactInputInvalid',
      `destination ${quoteName(destDir)}: cannot create staging directory`,
    );
  });
  const src = source.createReadStream();
  const gunzip = createGunzip();
  pipelineCb(src, gunzip, () => undefined);
  try {
    const extractor = new Extractor(tmp, lim, new ByteReader(gunzip[Symbol.asyncIterator]()));
    await extractor.run();
    await chmod(tmp, 0o755);
    await assertFreeDestination(dest, destDir);
    await rename(tmp, dest);
    return { entries: extractor.entries, bytes: extractor.bytes };
  } catch (err) {
    await rm(tmp, { recursive: true, force: true }).catch(() => undefined);
    throw mapExtractError(err);
  } finally {
    gunzip.destroy();
    src.destroy();
  }
}

export interface WriteOptions {
  /** Refuse streams longer than this (ArtifactInputInvalid). */
  maxBytes?: number;
  /** Verified before the file is published. */
  expectedSize?: number;
  expectedDigest?: string;
  /** Prefix of messages, e.g. `artifact "dist"`. */
  label?: string;
  mode?: number;
}

function verify(bytes: number, digest: string, opts: WriteOptions, label: string): void {
  if (opts.expectedSize !== undefined && bytes !== opts.expectedSize) {
    throw invalid(`${label}: size ${bytes} does not match the reference size ${opts.expectedSize}`);
  }
  if (opts.expectedDigest && digest !== opts.expectedDigest)
    throw invalid(`${label}: digest ${digest} does not match the reference digest`);
}

/**
 * Writes a stream to a new file at `dest` (which must not exist): a hidden temporary file in the
 * same directory is filled, verified and renamed into place, or removed on any failure.
 */
export async function writeStreamAtomically(
  input: Readable,
  dest: string,
  opts: WriteOptions = {},
): Promise<{ sizeBytes: number; digest: string }> {
  const label = opts.label ?? `destination ${quoteName(dest)}`;
  const target = resolve(dest);
  await assertFreeDestination(target, dest).catch((err: unknown) => {
    input.destroy();
    throw err;
  });
  const tmp = join(
    dirname(target),
    `.kruntimes-stage-${randomBytes(8).toString('hex')}-${basename(target).slice(0, 32)}`,
  );
  const max = opts.maxBytes ?? Infinity;
  const digest = new DigestStream(max, () => invalid(`${label}: content exceeds ${max} bytes`));
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
  let created = false;
  try {
    const fh = await open(tmp, flags, 0o600);
    created = true;
    await pipeline(input, digest, fh.createWriteStream());
    const hex = digest.digest();
    verify(digest.bytes, hex, opts, label);
    await chmod(tmp, opts.mode ?? 0o644);
    await assertFreeDestination(target, dest);
    await rename(tmp, target);
    return { sizeBytes: digest.bytes, digest: hex };
  } catch (err) {
    input.destroy();
    if (created) await rm(tmp, { force: true }).catch(() => undefined);
    throw asArtifactError(err, 'ArtifactInputInvalid', `${label}: cannot write`);
  }
}

/**
 * Copies a file artifact to `dest` (which must not exist). The source is opened with O_NOFOLLOW
 * (a symlink is rejected, never followed) and must be a regular file.
 */
export async function stageFile(
  src: string,
  dest: string,
  opts: WriteOptions = {},
): Promise<{ sizeBytes: number; digest: string }> {
  const label = opts.label ?? `source ${quoteName(src)}`;
  let fh;
  try {
    fh = await open(src, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    if (errnoCode(err) === 'ELOOP') throw invalid(`${label}: symbolic links are not allowed`);
    throw asArtifactError(err, 'ArtifactInputInvalid', `${label}: cannot open`);
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw invalid(`${label}: not a regular file`);
    if (opts.maxBytes !== undefined && st.size > opts.maxBytes)
      throw invalid(`${label}: size ${st.size} exceeds ${opts.maxBytes} bytes`);
    return await writeStreamAtomically(fh.createReadStream({ autoClose: false }), dest, { ...opts, label });
  } finally {
    await fh.close().catch(() => undefined);
  }
}
