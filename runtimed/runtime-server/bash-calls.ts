/**
 * The wire format of a warm bash worker's calls (bash-worker.ts), shared by the two ends that
 * drive a worker: the Runtime Server (stdin/stdout pipes) and runtimed itself when the worker
 * holds runtimed's call channel (bash-channel.ts, runtimed/bash-call-channel.ts).
 *   in    a 40-byte header `<24 hex token> <15-digit byte length>`, then the payload (read with
 *         `read -N`, which takes a pipe or socket in blocks, not one byte per read)
 *   out   the call's own stdout, then `\n<token> <status>\n`: the call's exit status, or `fenced`
 *         when the execution lease had lapsed (the function did not run)
 * Pure, except `tail` (one file read).
 */
import { randomBytes } from 'node:crypto';
import { open } from 'node:fs/promises';
import { StringDecoder } from 'node:string_decoder';
import { FUNCTION_IO_LIMIT, outputValue, type InvokeResult } from './function-base.ts';

/** The header's length: 24 hex digits of token, a space, 15 digits of payload length. */
export const CALL_HEADER_BYTES = 40;

/** Random bytes for the next call tokens, taken 12 at a time (one randomBytes call per 256 tokens). */
let tokenPool = Buffer.alloc(0);
let tokenAt = 0;

/** A new random call token (24 hex digits), from the CSPRNG as before, drawn in batches: this is the hot path. */
export function callToken(): string {
  if (tokenAt + 12 > tokenPool.length) {
    tokenPool = randomBytes(12 * 256);
    tokenAt = 0;
  }
  tokenAt += 12;
  return tokenPool.toString('hex', tokenAt - 12, tokenAt);
}

/** Pure: one call as bytes for the worker (header, then the payload as-is). */
export function callFrame(token: string, payload: string): Buffer {
  const body = Buffer.from(payload, 'utf8');
  const header = `${token} ${String(body.length).padStart(15, '0')}`;
  if (header.length !== CALL_HEADER_BYTES) throw new Error(`call token must be 24 characters, got ${token.length}`);
  return Buffer.concat([Buffer.from(header, 'latin1'), body]);
}

export interface CallEnd {
  output: string;
  status: string;
  tooLarge: boolean;
  /** Which marker ended the call: 0 the call's own, 1 the alternative (the Runtime Server's end-of-worker line). */
  by?: number;
}

/**
 * Pure: reads a worker's output up to the end marker of a call; keeps at most `limit` bytes of
 * output. An alternative marker (the Runtime Server's line for a worker that ended) ends a call too.
 * Each chunk is scanned once (from where a marker could start that the text before it did not hold),
 * so a large output costs linear time, not a rescan of everything read so far per chunk.
 */
export class CallOutput {
  private text = '';
  private bytes = 0;
  private tooLarge = false;
  /** No marker starts before this index of `text`. */
  private scanned = 0;
  /** The first marker found, waiting for the newline that ends its line. */
  private found?: { i: number; len: number; by: number };
  private readonly decoder = new StringDecoder('utf8');
  constructor(
    private marker: string,
    private readonly limit = FUNCTION_IO_LIMIT,
    private readonly alt?: string,
  ) {}

  /** A new call with its own end marker: whatever arrived before it (outside any call) is dropped. */
  reset(marker: string): void {
    this.marker = marker;
    this.text = '';
    this.bytes = 0;
    this.tooLarge = false;
    this.scanned = 0;
    this.found = undefined;
  }

  /** The first marker (of either kind) starting at or after `scanned`. */
  private find(): { i: number; len: number; by: number } | undefined {
    if (this.found) return this.found;
    const i = this.text.indexOf(this.marker, this.scanned);
    const j = this.alt ? this.text.indexOf(this.alt, this.scanned) : -1;
    // A marker cut by the chunk's end starts after this point: the next chunk is scanned from it.
    this.scanned = Math.max(0, this.text.length - Math.max(this.marker.length, this.alt?.length ?? 0) + 1);
    if (j >= 0 && (i < 0 || j < i)) this.found = { i: j, len: this.alt?.length ?? 0, by: 1 };
    else if (i >= 0) this.found = { i, len: this.marker.length, by: 0 };
    return this.found;
  }

  /** The call's end once its marker line is complete; 'overflow' the first time output passes the limit. */
  push(chunk: Buffer): CallEnd | 'overflow' | undefined {
    this.bytes += chunk.length;
    this.text += this.decoder.write(chunk);
    const m = this.find();
    const nl = m ? this.text.indexOf('\n', m.i + m.len) : -1;
    if (m && nl >= 0) {
      const output = this.text.slice(0, m.i);
      const end = {
        output: this.tooLarge ? '' : output,
        status: this.text.slice(m.i + m.len, nl),
        tooLarge: this.tooLarge || Buffer.byteLength(output) > this.limit,
        by: m.by,
      };
      this.text = this.text.slice(nl + 1);
      this.bytes = Buffer.byteLength(this.text);
      this.tooLarge = false;
      this.scanned = 0;
      this.found = undefined;
      return end;
    }
    const keep = Math.max(this.marker.length, this.alt?.length ?? 0) + 16;
    if (this.bytes <= this.limit + keep) return undefined;
    // Past the limit: keep only enough to find a marker.
    this.text = this.text.slice(-keep);
    this.bytes = Buffer.byteLength(this.text);
    this.scanned = 0;
    this.found = undefined;
    if (this.tooLarge) return undefined;
    this.tooLarge = true;
    return 'overflow';
  }

  /** What arrived since the last marker (the output of a call whose worker ended without one). */
  rest(): CallEnd {
    const end = { output: this.tooLarge ? '' : this.text, status: '', tooLarge: this.tooLarge };
    this.reset(this.marker);
    return end;
  }
}

/** The last `max` bytes of a file, or '' when it cannot be read. */
export async function tail(path: string, max = 4096): Promise<string> {
  try {
    const f = await open(path, 'r');
    try {
      const size = (await f.stat()).size;
      const buf = Buffer.alloc(Math.min(size, max));
      await f.read(buf, 0, buf.length, size - buf.length);
      return buf.toString('utf8');
    } finally {
      await f.close();
    }
  } catch {
    return '';
  }
}

/** How a call ended besides its output: cancelled (killed on request), or its output passed the limit. */
export interface CallFlags {
  cancelled: boolean;
  overflow: boolean;
}

/**
 * Pure: a call's result from its end, the same on both paths; undefined for a failed call, whose
 * error needs the tail of its stderr (callResult reads it).
 */
export function callResultNow(end: CallEnd | undefined, flags: CallFlags): InvokeResult | undefined {
  if (flags.cancelled) return { ok: false, reason: 'Cancelled', error: 'the call was cancelled' };
  if (end?.tooLarge || flags.overflow)
    return { ok: false, reason: 'OutputTooLarge', error: `output exceeds ${FUNCTION_IO_LIMIT} bytes` };
  if (end?.status === 'fenced')
    return { ok: false, reason: 'NotRegistered', error: 'fenced: the execution lease lapsed' };
  if (!end || end.status === '')
    return { ok: false, reason: 'FunctionError', error: 'the bash worker ended during the call' };
  if (end.status !== '0') return undefined;
  return { ok: true, output: outputValue(end.output) };
}

/**
 * A call's result from its end, the same on both paths. `stderr` is asked only for a failed call
 * (the tail of the call's stderr file, which only the Runtime Server can read).
 */
export async function callResult(
  end: CallEnd | undefined,
  flags: CallFlags,
  stderr: () => Promise<string>,
): Promise<InvokeResult> {
  const now = callResultNow(end, flags);
  if (now) return now;
  const text = (await stderr()).trim().slice(-1024);
  return { ok: false, reason: 'FunctionError', error: `exit status ${end?.status ?? ''}: ${text}` };
}
