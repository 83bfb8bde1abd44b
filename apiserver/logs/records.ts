/**
 * The pure part of Run logs: runtimed's Run-keyed JSON records (one per output line, with
 * attempt and seq), selection of one Run's records, opaque resumable cursors, and snapshot
 * bounds (tailLines default 100, max 500, payload at most 1 MiB).
 */
export interface LogRecord {
  time: string;
  stream: string;
  message: string;
  attempt: number;
  seq: number;
}
export interface CursorPos {
  attempt: number;
  seq: number;
}

export const DEFAULT_TAIL = 100;
export const MAX_TAIL = 500;
export const MAX_PAYLOAD = 1 << 20;

/** Parses one runtimed stdout line; undefined for other lines or other Runs. */
export function parseRecord(line: string, runUID: string): LogRecord | undefined {
  if (!line.startsWith('{') || !line.includes(runUID)) return undefined;
  try {
    const o = JSON.parse(line) as Partial<LogRecord> & { run_uid?: string };
    if (o.run_uid !== runUID || typeof o.message !== 'string') return undefined;
    return {
      time: o.time ?? '',
      stream: o.stream ?? 'stdout',
      message: o.message,
      attempt: Number(o.attempt ?? 1),
      seq: Number(o.seq ?? 0),
    };
  } catch {
    return undefined;
  }
}

/** The attempt whose end-of-log marker this runtimed stdout line is, for this Run; else undefined. */
export function parseEnd(line: string, runUID: string): number | undefined {
  if (!line.startsWith('{') || !line.includes('"end":true') || !line.includes(runUID)) return undefined;
  try {
    const o = JSON.parse(line) as { run_uid?: string; end?: boolean; attempt?: number };
    return o.run_uid === runUID && o.end === true ? Number(o.attempt ?? 1) : undefined;
  } catch {
    return undefined;
  }
}

/** How long a follow of a terminal Run waits for more records when no end-of-log marker comes. */
export const QUIET_MS = 3000;

/**
 * Whether a follow may end: only once the Run is terminal, and then as soon as the end-of-log
 * marker of its final attempt was read, or (runtimed gone before it wrote one) after the Pod
 * log has been quiet for QUIET_MS while this server was reading it.
 */
export function followDone(f: {
  terminalAttempt: number | undefined;
  endedAttempt: number;
  quietMs: number;
  paused: boolean;
}): boolean {
  if (f.terminalAttempt === undefined) return false;
  if (f.endedAttempt >= f.terminalAttempt) return true;
  return !f.paused && f.quietMs >= QUIET_MS;
}

export function encodeCursor(p: CursorPos): string {
  return Buffer.from(`v1:${p.attempt}:${p.seq}`).toString('base64url');
}

export function decodeCursor(s: string): CursorPos | undefined {
  const m = /^v1:(\d+):(\d+)$/.exec(Buffer.from(s, 'base64url').toString('utf8'));
  return m ? { attempt: Number(m[1]), seq: Number(m[2]) } : undefined;
}

/** Strictly after the cursor in (attempt, seq) order. */
export function after(r: CursorPos, c: CursorPos | undefined): boolean {
  if (!c) return true;
  return r.attempt > c.attempt || (r.attempt === c.attempt && r.seq > c.seq);
}

/** Records of one Run from a log text, in order, each once (a restarted runtimed may repeat records). */
export function runRecords(text: string, runUID: string, cursor?: CursorPos): LogRecord[] {
  const out: LogRecord[] = [];
  let last = cursor;
  for (const line of text.split('\n')) {
    const r = parseRecord(line, runUID);
    if (r && after(r, last)) {
      out.push(r);
      last = r;
    }
  }
  return out;
}

export function parseTail(raw: unknown): number | string {
  if (raw === undefined) return DEFAULT_TAIL;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) return `tailLines must be a non-negative integer, got ${JSON.stringify(raw)}`;
  return Math.min(n, MAX_TAIL);
}

/** The last `tail` records whose JSON fits in MAX_PAYLOAD, and the cursor after the last one. */
export function snapshot(
  records: LogRecord[],
  tail: number,
  maxBytes = MAX_PAYLOAD,
): { items: LogRecord[]; cursor?: string } {
  let items = tail === 0 ? [] : records.slice(-tail);
  let size = Buffer.byteLength(JSON.stringify({ items }));
  while (items.length && size > maxBytes) {
    size -= Buffer.byteLength(JSON.stringify(items[0])) + 1;
    items = items.slice(1);
  }
  const last = records[records.length - 1];
  return { items, ...(last ? { cursor: encodeCursor(last) } : {}) };
}

/**
 * Whether a snapshot read from the end of the Pod log (the last lines since the Run's creation) is
 * the snapshot the whole log gives: the window is a suffix of the log, so when it holds at least
 * `tail` records of the Run (at least one, for the cursor, when tail is 0) they are the Run's
 * newest; and when it holds the Run's first record (attempt 1, seq 0) it holds all of them. A
 * window shorter than asked for proves nothing on a kubelet, which counts a long line's partial
 * entries as lines of its own.
 */
export function tailWindowSuffices(w: { recordsRead: number; tail: number; sawStart: boolean }): boolean {
  return w.sawStart || w.recordsRead >= Math.max(w.tail, 1);
}

/** A runtimed log line longer than this is not a record (runtimed's lines are bounded far below it). */
export const MAX_LINE_BYTES = 8 << 20;

/**
 * Splits a stream into lines while holding at most MAX_LINE_BYTES of an unfinished line: a line
 * longer than that is dropped (up to its newline) instead of buffered, so a Pod log cannot grow
 * this process's memory without bound.
 */
export class LineSplitter {
  private partial = '';
  private skipping = false;

  constructor(private readonly maxLine = MAX_LINE_BYTES) {}

  /** Characters of an unfinished line held right now. */
  get held(): number {
    return this.partial.length;
  }

  /** The complete lines in `chunk` (over-long ones left out). */
  push(chunk: string): string[] {
    const lines = (this.partial + chunk).split('\n');
    this.partial = lines.pop() ?? '';
    const out: string[] = [];
    for (const line of lines) {
      if (!this.skipping) out.push(line);
      this.skipping = false;
    }
    if (this.partial.length > this.maxLine) {
      this.partial = '';
      this.skipping = true;
    }
    return out;
  }

  /** The unfinished last line, if any (the stream ended without a newline). */
  end(): string | undefined {
    const rest = this.skipping ? '' : this.partial;
    this.partial = '';
    this.skipping = false;
    return rest || undefined;
  }
}

/**
 * Builds a snapshot from a log stream without holding the log: only the newest `tail` records
 * of one Run (and not much more than `maxBytes` of them) are kept while reading, and a line
 * longer than MAX_LINE_BYTES is skipped instead of buffered.
 */
export class RecordTail {
  /** Whether the Run's first record (attempt 1, seq 0) was read. */
  sawStart = false;
  /** Records of the Run read, in order and after the cursor, before the tail and size bounds. */
  recordsRead = 0;
  private readonly items: LogRecord[] = [];
  private readonly sizes: number[] = [];
  private bytes = 0;
  private pos: CursorPos | undefined;
  private readonly splitter = new LineSplitter();

  constructor(
    private readonly runUID: string,
    private readonly tail: number,
    cursor?: CursorPos,
    private readonly maxBytes = MAX_PAYLOAD,
  ) {
    this.pos = cursor;
  }

  /** Records held right now (at most max(tail, 1)). */
  get kept(): number {
    return this.items.length;
  }

  write(chunk: string): void {
    for (const line of this.splitter.push(chunk)) this.line(line);
  }

  /** The snapshot: the last `tail` records that fit in maxBytes, and the cursor after the last record read. */
  end(): { items: LogRecord[]; cursor?: string } {
    const rest = this.splitter.end();
    if (rest !== undefined) this.line(rest);
    return snapshot(this.items, this.tail, this.maxBytes);
  }

  private line(line: string): void {
    const r = parseRecord(line, this.runUID);
    if (r && r.attempt <= 1 && r.seq === 0) this.sawStart = true;
    if (!r || !after(r, this.pos)) return;
    this.pos = r;
    this.recordsRead++;
    const size = Buffer.byteLength(JSON.stringify(r)) + 1;
    this.items.push(r);
    this.sizes.push(size);
    this.bytes += size;
    // The newest record always stays: it gives the cursor even when tail is 0 or it is too large.
    while (this.items.length > 1 && (this.items.length > this.tail || this.bytes > this.maxBytes)) {
      this.items.shift();
      this.bytes -= this.sizes.shift() ?? 0;
    }
  }
}
