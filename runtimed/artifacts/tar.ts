/**
 * Minimal ustar codec for directory artifacts. The writer emits only what a deterministic
 * archive needs: regular files and directories, mtime 0, uid/gid 0, no user/group names, no PAX
 * records; a path that does not fit ustar's name/prefix fields gets a GNU long-name entry. The
 * reader decodes ustar and GNU headers plus PAX `path`/`size` records, and leaves every policy
 * decision (which entry types are allowed) to the extractor.
 */

export const BLOCK = 512;
export const END_OF_ARCHIVE = Buffer.alloc(2 * BLOCK);
const USTAR_MAGIC = Buffer.from('ustar\u000000', 'latin1');
const GNU_MAGIC = Buffer.from('ustar  \u0000', 'latin1');
const MAX_OCTAL_11 = 0o77777777777;

export interface EntryHeader {
  /** '/'-separated path; directories end with '/'. */
  name: string;
  kind: 'file' | 'dir';
  mode: number;
  size: number;
}

export function paddingFor(size: number): number {
  const rem = size % BLOCK;
  return rem === 0 ? 0 : BLOCK - rem;
}

function writeOctal(buf: Buffer, offset: number, width: number, value: number): void {
  buf.write(value.toString(8).padStart(width - 1, '0'), offset, width - 1, 'latin1');
  buf[offset + width - 1] = 0;
}

/** Size field: octal when it fits, else GNU base-256 (high bit set, big-endian). */
function writeSize(buf: Buffer, offset: number, size: number): void {
  if (size <= MAX_OCTAL_11) return writeOctal(buf, offset, 12, size);
  buf.fill(0, offset, offset + 12);
  let v = BigInt(size);
  for (let i = offset + 11; i > offset; i--) {
    buf[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  buf[offset] = 0x80;
}

function checksum(block: Buffer): number {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : (block[i] ?? 0);
  return sum;
}

interface RawFields {
  name: Buffer;
  prefix?: Buffer;
  typeflag: string;
  mode: number;
  size: number;
  gnu: boolean;
}

function headerBlock(f: RawFields): Buffer {
  const b = Buffer.alloc(BLOCK);
  f.name.copy(b, 0, 0, Math.min(f.name.length, 100));
  writeOctal(b, 100, 8, f.mode);
  writeOctal(b, 108, 8, 0);
  writeOctal(b, 116, 8, 0);
  writeSize(b, 124, f.size);
  writeOctal(b, 136, 12, 0);
  b.write(f.typeflag, 156, 1, 'latin1');
  (f.gnu ? GNU_MAGIC : USTAR_MAGIC).copy(b, 257);
  if (!f.gnu) {
    writeOctal(b, 329, 8, 0);
    writeOctal(b, 337, 8, 0);
  }
  if (f.prefix) f.prefix.copy(b, 345);
  b.write(`${checksum(b).toString(8).padStart(6, '0')}\u0000 `, 148, 8, 'latin1');
  return b;
}

/** Splits a path into ustar prefix (≤155 bytes) and name (≤100 bytes) at a '/', if possible. */
export function splitUstarName(bytes: Buffer): { prefix: Buffer; name: Buffer } | undefined {
  if (bytes.length <= 100) return { prefix: Buffer.alloc(0), name: bytes };
  for (let i = 0; i < bytes.length && i <= 155; i++) {
    if (bytes[i] !== 0x2f) continue;
    const rest = bytes.length - i - 1;
    if (rest > 0 && rest <= 100) return { prefix: bytes.subarray(0, i), name: bytes.subarray(i + 1) };
  }
  return undefined;
}

/** The header block(s) of one entry; a GNU long-name entry precedes it when ustar cannot hold the path. */
export function encodeHeader(h: EntryHeader): Buffer {
  const typeflag = h.kind === 'dir' ? '5' : '0';
  const size = h.kind === 'dir' ? 0 : h.size;
  const bytes = Buffer.from(h.name, 'utf8');
  const split = splitUstarName(bytes);
  if (split) return headerBlock({ name: split.name, prefix: split.prefix, typeflag, mode: h.mode, size, gnu: false });
  const data = Buffer.concat([bytes, Buffer.alloc(1)]);
  return Buffer.concat([
    headerBlock({
      name: Buffer.from('./@LongLink', 'latin1'),
      typeflag: 'L',
      mode: 0o644,
      size: data.length,
      gnu: true,
    }),
    data,
    Buffer.alloc(paddingFor(data.length)),
    headerBlock({ name: bytes, typeflag, mode: h.mode, size, gnu: true }),
  ]);
}

export interface DecodedHeader {
  typeflag: string;
  /** Raw path bytes (ustar prefix joined with name); GNU/PAX long names are applied by the caller. */
  path: Buffer;
  mode: number;
  size: number;
}

export function isZeroBlock(block: Buffer): boolean {
  for (const byte of block) if (byte !== 0) return false;
  return true;
}

function field(block: Buffer, offset: number, width: number): Buffer {
  const f = block.subarray(offset, offset + width);
  const nul = f.indexOf(0);
  return nul === -1 ? f : f.subarray(0, nul);
}

/** Parses an octal (or GNU base-256) numeric field; undefined when malformed. */
export function parseNumeric(block: Buffer, offset: number, width: number): number | undefined {
  const f = block.subarray(offset, offset + width);
  if (((f[0] ?? 0) & 0x80) !== 0) {
    if (f[0] === 0xff) return undefined;
    let v = BigInt((f[0] ?? 0) & 0x7f);
    for (let i = 1; i < f.length; i++) v = (v << 8n) | BigInt(f[i] ?? 0);
    return v > BigInt(Number.MAX_SAFE_INTEGER) ? undefined : Number(v);
  }
  const text = f
    .toString('latin1')
    .replace(/[\0 ]+$/, '')
    .replace(/^ +/, '');
  if (!/^[0-7]*$/.test(text)) return undefined;
  return text === '' ? 0 : parseInt(text, 8);
}

/** Decodes one non-zero header block; returns a problem description when it is not a valid header. */
export function decodeHeader(block: Buffer): DecodedHeader | string {
  const stored = parseNumeric(block, 148, 8);
  if (stored === undefined || stored !== checksum(block)) return 'invalid header checksum';
  const magic = block.subarray(257, 265);
  const gnu = magic.equals(GNU_MAGIC);
  if (!gnu && !magic.subarray(0, 6).equals(USTAR_MAGIC.subarray(0, 6))) return 'not a ustar archive';
  const size = parseNumeric(block, 124, 12);
  const mode = parseNumeric(block, 100, 8);
  if (size === undefined || mode === undefined) return 'malformed numeric header field';
  const name = field(block, 0, 100);
  const prefix = gnu ? Buffer.alloc(0) : field(block, 345, 155);
  const path = prefix.length > 0 ? Buffer.concat([prefix, Buffer.from('/'), name]) : name;
  return { typeflag: String.fromCharCode(block[156] ?? 0), path, mode, size };
}

/** Parses PAX extended header records ("<len> <key>=<value>\n"); throws on malformed data. */
export function parsePax(data: Buffer): Map<string, Buffer> {
  const records = new Map<string, Buffer>();
  let pos = 0;
  while (pos < data.length) {
    if (data[pos] === 0) break;
    const space = data.indexOf(0x20, pos);
    const len = space === -1 ? NaN : Number(data.subarray(pos, space).toString('latin1'));
    if (!Number.isSafeInteger(len) || len <= 0 || pos + len > data.length || data[pos + len - 1] !== 0x0a) {
      throw new Error('malformed extended header');
    }
    const record = data.subarray(space + 1, pos + len - 1);
    const eq = record.indexOf(0x3d);
    if (eq <= 0) throw new Error('malformed extended header');
    records.set(record.subarray(0, eq).toString('utf8'), record.subarray(eq + 1));
    pos += len;
  }
  return records;
}
