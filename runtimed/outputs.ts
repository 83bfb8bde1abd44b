/**
 * The `$KRUNTIME_OUTPUTS` file: bounded KEY=VALUE lines that become Run.status.outputs
 * (upstream §2.4). Parsing never throws; every rejection carries a stable reason and a message
 * naming the line or the limit.
 */
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { drive, op, type Walk } from './artifacts/fs-ops.ts';

export const MAX_OUTPUT_KEYS = 64;
export const MAX_OUTPUT_KEY_BYTES = 128;
export const MAX_OUTPUT_VALUE_BYTES = 8 * 1024;
export const MAX_OUTPUTS_BYTES = 64 * 1024;
/** The outputs file itself (comments and blank lines included) is never read past this many bytes. */
export const MAX_OUTPUTS_FILE_BYTES = 1024 * 1024;

export type OutputsReason = 'OutputsInvalid' | 'OutputsTooLarge';
export type OutputsResult =
  { ok: true; outputs: Record<string, string> | undefined } | { ok: false; reason: OutputsReason; message: string };

// Go's strings.TrimSpace (unicode.IsSpace), which differs from String.prototype.trim on U+0085 and U+FEFF.
const SPACE = '[\\t\\n\\v\\f\\r \\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]+';
const LEADING_SPACE = new RegExp(`^${SPACE}`);
const TRAILING_SPACE = new RegExp(`${SPACE}$`);
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function trimSpace(s: string): string {
  return s.replace(LEADING_SPACE, '').replace(TRAILING_SPACE, '');
}

function invalid(message: string): OutputsResult {
  return { ok: false, reason: 'OutputsInvalid', message };
}

function tooLarge(message: string): OutputsResult {
  return { ok: false, reason: 'OutputsTooLarge', message };
}

/** Splits on LF; a final empty piece after a trailing newline is not a line. CR before LF is dropped. */
function splitLines(bytes: Buffer): Buffer[] {
  const lines: Buffer[] = [];
  let start = 0;
  while (start < bytes.length) {
    let end = bytes.indexOf(0x0a, start);
    const next = end === -1 ? bytes.length : end + 1;
    if (end === -1) end = bytes.length;
    const line = end > start && bytes[end - 1] === 0x0d ? bytes.subarray(start, end - 1) : bytes.subarray(start, end);
    lines.push(line);
    start = next;
  }
  return lines;
}

function quote(s: string): string {
  return JSON.stringify(s.length > 64 ? `${s.slice(0, 64)}…` : s);
}

class OutputsAccumulator {
  readonly values = new Map<string, string>();
  private total = 0;

  /** Adds one KEY=VALUE; returns a rejection or undefined. */
  add(key: string, value: string, line: number): OutputsResult | undefined {
    const keyBytes = Buffer.byteLength(key, 'utf8');
    const valueBytes = Buffer.byteLength(value, 'utf8');
    if (keyBytes > MAX_OUTPUT_KEY_BYTES)
      return tooLarge(`output key on line ${line} exceeds ${MAX_OUTPUT_KEY_BYTES} bytes`);
    if (valueBytes > MAX_OUTPUT_VALUE_BYTES) {
      return tooLarge(`output value for ${quote(key)} on line ${line} exceeds ${MAX_OUTPUT_VALUE_BYTES} bytes`);
    }
    const previous = this.values.get(key);
    if (previous !== undefined) {
      this.total -= keyBytes + Buffer.byteLength(previous, 'utf8');
    } else if (this.values.size >= MAX_OUTPUT_KEYS) {
      return tooLarge(`outputs exceed ${MAX_OUTPUT_KEYS} keys (line ${line})`);
    }
    this.total += keyBytes + valueBytes;
    if (this.total > MAX_OUTPUTS_BYTES) return tooLarge(`outputs exceed ${MAX_OUTPUTS_BYTES} bytes (line ${line})`);
    this.values.set(key, value);
    return undefined;
  }
}

/** Parses the outputs file content. Later declarations of a key replace earlier ones. */
export function parseOutputs(bytes: Buffer): OutputsResult {
  const acc = new OutputsAccumulator();
  const lines = splitLines(bytes);
  for (let i = 0; i < lines.length; i++) {
    const n = i + 1;
    let text: string;
    try {
      text = utf8.decode(lines[i]);
    } catch {
      return invalid(`outputs line ${n} is not valid UTF-8`);
    }
    const trimmed = trimSpace(text);
    if (trimmed === '' || trimmed.startsWith('#')) continue;
    const eq = trimmed.indexOf('=');
    if (eq === -1) return invalid(`outputs line ${n} must use KEY=VALUE format`);
    const key = trimSpace(trimmed.slice(0, eq));
    const value = trimSpace(trimmed.slice(eq + 1));
    if (key === '') return invalid(`outputs line ${n} has an empty key`);
    const rejected = acc.add(key, value, n);
    if (rejected) return rejected;
  }
  // fromEntries defines own properties, so keys such as "__proto__" stay plain data.
  return { ok: true, outputs: acc.values.size === 0 ? undefined : Object.fromEntries(acc.values) };
}

function errnoCode(err: unknown): string {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string' ? err.code : 'EIO';
}

async function readCapped(fh: FileHandle, cap: number): Promise<Buffer | undefined> {
  const buf = Buffer.alloc(Math.min(cap + 1, 64 * 1024));
  const chunks: Buffer[] = [];
  let total = 0;
  for (;;) {
    const { bytesRead } = await fh.read(buf, 0, buf.length, null);
    if (bytesRead === 0) break;
    total += bytesRead;
    if (total > cap) return undefined;
    chunks.push(Buffer.from(buf.subarray(0, bytesRead)));
  }
  return Buffer.concat(chunks, total);
}

/** Whether `path` names an entry (of any type, a link too); an error other than ENOENT says yes. */
function* present(path: string): Walk<boolean> {
  try {
    yield* op.lstat(path);
    return true;
  } catch (err) {
    return errnoCode(err) !== 'ENOENT';
  }
}

/**
 * Reads and parses an outputs file. A missing file means no outputs. The file is opened without
 * following a symlink and without blocking on a FIFO; anything but a regular file is rejected, and
 * the read stops after `maxFileBytes` so a huge file cannot exhaust memory.
 */
export async function readOutputsFile(path: string, maxFileBytes = MAX_OUTPUTS_FILE_BYTES): Promise<OutputsResult> {
  // Most Runs write no outputs: that costs one lstat on the event loop, not a thread-pool open.
  if (!(await drive(present(path)))) return { ok: true, outputs: undefined };
  let fh: FileHandle;
  try {
    fh = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT') return { ok: true, outputs: undefined };
    if (code === 'ELOOP') return invalid('outputs file must not be a symbolic link');
    return invalid(`cannot open outputs file: ${code}`);
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) return invalid('outputs file must be a regular file');
    if (st.size > maxFileBytes) return tooLarge(`outputs file exceeds ${maxFileBytes} bytes`);
    const bytes = await readCapped(fh, maxFileBytes);
    if (!bytes) return tooLarge(`outputs file exceeds ${maxFileBytes} bytes`);
    return parseOutputs(bytes);
  } catch (err) {
    return invalid(`cannot read outputs file: ${errnoCode(err)}`);
  } finally {
    await fh.close().catch(() => undefined);
  }
}
