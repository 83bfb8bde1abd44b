/** Reading CRI-format container log files with the kubelet's /containerLogs query semantics. */
import { createReadStream, existsSync, readFileSync, statSync } from 'node:fs';

export interface LogRecord {
  time: string;
  stream: string;
  message: string;
}

export interface LogQuery {
  follow: boolean;
  previous: boolean;
  timestamps: boolean;
  tailLines?: number;
  sinceTime?: number;
  limitBytes?: number;
}

export function parseLine(line: string): LogRecord | undefined {
  const a = line.indexOf(' ');
  const b = line.indexOf(' ', a + 1);
  const c = line.indexOf(' ', b + 1);
  if (a < 0 || b < 0 || c < 0) return undefined;
  return { time: line.slice(0, a), stream: line.slice(a + 1, b), message: line.slice(c + 1) };
}

export function formatRecord(r: LogRecord, timestamps: boolean): string {
  return timestamps ? `${r.time} ${r.message}\n` : `${r.message}\n`;
}

export function parseQuery(q: URLSearchParams, now: number): LogQuery {
  const num = (k: string): number | undefined => {
    const v = q.get(k);
    if (v === null || v === '') return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) throw new Error(`invalid ${k}: ${v}`);
    return n;
  };
  const since = q.get('sinceTime');
  const sinceSeconds = num('sinceSeconds');
  const sinceTime = since ? Date.parse(since) : sinceSeconds !== undefined ? now - sinceSeconds * 1000 : undefined;
  if (sinceTime !== undefined && Number.isNaN(sinceTime)) throw new Error(`invalid sinceTime: ${since}`);
  const tail = num('tailLines');
  const limit = num('limitBytes');
  return {
    follow: q.get('follow') === 'true',
    previous: q.get('previous') === 'true',
    timestamps: q.get('timestamps') === 'true',
    ...(tail !== undefined ? { tailLines: tail } : {}),
    ...(sinceTime !== undefined ? { sinceTime } : {}),
    ...(limit !== undefined ? { limitBytes: limit } : {}),
  };
}

/** The records of a complete file selected by sinceTime and tailLines. */
export function selectRecords(text: string, q: LogQuery): LogRecord[] {
  let recs = text
    .split('\n')
    .filter((l) => l)
    .map(parseLine)
    .filter((r): r is LogRecord => !!r);
  if (q.sinceTime !== undefined) recs = recs.filter((r) => Date.parse(r.time) >= q.sinceTime!);
  if (q.tailLines !== undefined) recs = q.tailLines === 0 ? [] : recs.slice(-q.tailLines);
  return recs;
}

export interface LogSink {
  write(s: string): boolean;
  closed(): boolean;
}

/** Writes the selected records, then (follow) new ones until done() says the container stopped. */
export async function streamLog(file: string, q: LogQuery, sink: LogSink, done: () => boolean): Promise<void> {
  let budget = q.limitBytes ?? Infinity;
  const emit = (r: LogRecord): boolean => {
    const s = formatRecord(r, q.timestamps);
    if (budget <= 0) return false;
    const out = Buffer.byteLength(s) > budget ? Buffer.from(s).subarray(0, budget).toString() : s;
    budget -= Buffer.byteLength(out);
    sink.write(out);
    return budget > 0;
  };
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
  for (const r of selectRecords(text, q)) if (!emit(r)) return;
  if (q.follow) await followFile(file, Buffer.byteLength(text), q, emit, { sink, done });
}

async function followFile(
  file: string,
  start: number,
  q: LogQuery,
  emit: (r: LogRecord) => boolean,
  { sink, done }: { sink: LogSink; done: () => boolean },
): Promise<void> {
  let offset = start;
  let partial = '';
  for (;;) {
    if (sink.closed()) return;
    const finished = done();
    const size = existsSync(file) ? statSync(file).size : 0;
    if (size > offset) {
      const chunk = await readRange(file, offset, size);
      offset = size;
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      for (const l of lines) {
        const r = parseLine(l);
        if (r && (q.sinceTime === undefined || Date.parse(r.time) >= q.sinceTime) && !emit(r)) return;
      }
      continue;
    }
    if (finished) return;
    await new Promise((r) => setTimeout(r, 50));
  }
}

function readRange(file: string, start: number, end: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    createReadStream(file, { start, end: end - 1 })
      .on('data', (c) => chunks.push(c as Buffer))
      .on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
      .on('error', reject);
  });
}
