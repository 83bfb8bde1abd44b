/**
 * File-system work written once, run synchronously while it is small (issue 17). A walk is a
 * generator that yields one operation at a time (FsOp) and receives its result, or has its error
 * thrown back in; drive() runs the first `budget` operations with the *Sync calls and the rest
 * through the libuv thread pool. A Run directory's few operations then cost their system calls
 * only, not a thread-pool hand-off each (a futex wake, an eventfd write and a promise per call),
 * and a large tree still never holds the event loop for more than `budget` system calls.
 */
import {
  closeSync,
  fstat,
  fstatSync,
  lstat,
  lstatSync,
  mkdir,
  mkdirSync,
  open,
  opendirSync,
  openSync,
  readdir,
  rmdir,
  unlink,
  unlinkSync,
  write,
  writeSync,
  type Stats,
} from 'node:fs';
import { promisify } from 'node:util';

/** A directory entry as a listing gives it (the type from d_type). */
export interface Listed {
  name: string;
  dir: boolean;
}

export type FsOp =
  | { op: 'mkdir'; path: string; mode: number }
  | { op: 'open'; path: string; flags: number; mode?: number }
  | { op: 'write'; fd: number; data: Buffer }
  | { op: 'fstat'; fd: number }
  | { op: 'lstat'; path: string }
  | { op: 'readdir'; path: string }
  | { op: 'unlink'; path: string }
  | { op: 'rmdir'; path: string };

/** A walk: yields operations, returns T. */
export type Walk<T> = Generator<FsOp, T, unknown>;

/** System calls one drive() makes on the event loop at most before it goes through the thread pool. */
export const SYNC_BUDGET = 64;
/** A larger write goes through the thread pool. */
export const SYNC_WRITE_BYTES = 64 * 1024;
/** What runSync answers for an operation too large to run on the event loop. */
const DEFER = Symbol('defer');
/**
 * Operations that wait in the kernel rather than work: they always go through the thread pool.
 * rmdir on ext4 waits 120-210 µs for almost no CPU (measured on the benchmark machine, 2026-12-03).
 */
const WAITS: ReadonlySet<FsOp['op']> = new Set(['rmdir']);

const asyncOps = {
  mkdir: promisify(mkdir),
  open: promisify(open),
  write: promisify(write),
  fstat: promisify(fstat),
  lstat: promisify(lstat),
  readdir: promisify(readdir),
  unlink: promisify(unlink),
  rmdir: promisify(rmdir),
};

function runAsync(o: FsOp): Promise<unknown> {
  switch (o.op) {
    case 'mkdir':
      return asyncOps.mkdir(o.path, { mode: o.mode });
    case 'open':
      return asyncOps.open(o.path, o.flags, o.mode);
    case 'write':
      return writeAllAsync(o.fd, o.data);
    case 'fstat':
      return asyncOps.fstat(o.fd);
    case 'lstat':
      return asyncOps.lstat(o.path);
    case 'readdir':
      return asyncOps
        .readdir(o.path, { withFileTypes: true })
        .then((list) => list.map((d): Listed => ({ name: d.name, dir: d.isDirectory() })));
    case 'unlink':
      return asyncOps.unlink(o.path);
    case 'rmdir':
      return asyncOps.rmdir(o.path);
  }
}

/** The entries of a directory if it has at most `max`, read a few at a time; undefined when it has more. */
export function listAtMost(path: string, max: number): Listed[] | undefined {
  const d = opendirSync(path, { bufferSize: 32 });
  try {
    const out: Listed[] = [];
    for (let e = d.readSync(); e !== null; e = d.readSync()) {
      if (out.length >= max) return undefined;
      out.push({ name: e.name, dir: e.isDirectory() });
    }
    return out;
  } finally {
    d.closeSync();
  }
}

async function writeAllAsync(fd: number, data: Buffer): Promise<void> {
  for (let off = 0; off < data.length;) off += (await asyncOps.write(fd, data, off)).bytesWritten;
}

function writeAllSync(fd: number, data: Buffer): void {
  for (let off = 0; off < data.length;) off += writeSync(fd, data, off);
}

/** Runs `o` synchronously; DEFER for a listing longer than `max` entries or a large write. */
function runSync(o: FsOp, max: number): unknown {
  switch (o.op) {
    case 'mkdir':
      return mkdirSync(o.path, { mode: o.mode });
    case 'open':
      return openSync(o.path, o.flags, o.mode);
    case 'write':
      return o.data.length > SYNC_WRITE_BYTES ? DEFER : writeAllSync(o.fd, o.data);
    case 'fstat':
      return fstatSync(o.fd);
    case 'lstat':
      return lstatSync(o.path);
    case 'readdir':
      return listAtMost(o.path, max) ?? DEFER;
    case 'unlink':
      return unlinkSync(o.path);
    case 'rmdir':
      return DEFER;
  }
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/** Observes each operation and how it ran (tests). */
export type FsTrace = (o: FsOp, sync: boolean) => void;

/**
 * Runs a walk: synchronously while fewer than `budget` system calls were made (a listing counts
 * one per entry), then through the thread pool. A listing longer than what is left of the budget,
 * or a write of more than SYNC_WRITE_BYTES, runs asynchronously, and so does everything after it;
 * an operation that waits (WAITS) runs asynchronously on its own.
 */
export async function drive<T>(walk: Walk<T>, budget = SYNC_BUDGET, trace?: FsTrace): Promise<T> {
  let left = budget;
  let last: Outcome = { ok: true, value: undefined };
  for (;;) {
    const step: IteratorResult<FsOp, T> = last.ok ? walk.next(last.value) : walk.throw(last.error);
    if (step.done) return step.value;
    const o: FsOp = step.value;
    let outcome: Outcome | undefined;
    if (left > 0 && !WAITS.has(o.op)) {
      left -= 1;
      outcome = attempt(() => runSync(o, left));
      if (outcome.ok && outcome.value === DEFER) outcome = undefined;
      else if (outcome.ok && o.op === 'readdir') left -= (outcome.value as Listed[]).length;
    }
    trace?.(o, outcome !== undefined);
    if (!outcome && !WAITS.has(o.op)) left = 0;
    last = outcome ?? (await runAsync(o).then(succeeded, failed));
  }
}

function attempt(fn: () => unknown): Outcome {
  try {
    return succeeded(fn());
  } catch (error) {
    return failed(error);
  }
}

function succeeded(value: unknown): Outcome {
  return { ok: true, value };
}

function failed(error: unknown): Outcome {
  return { ok: false, error };
}

/** The typed operations a walk yields (`yield* op.lstat(path)`). */
export const op = {
  *mkdir(path: string, mode: number): Walk<void> {
    yield { op: 'mkdir', path, mode };
  },
  *open(path: string, flags: number, mode?: number): Walk<number> {
    return (yield { op: 'open', path, flags, mode }) as number;
  },
  *write(fd: number, data: Buffer): Walk<void> {
    yield { op: 'write', fd, data };
  },
  *fstat(fd: number): Walk<Stats> {
    return (yield { op: 'fstat', fd }) as Stats;
  },
  *lstat(path: string): Walk<Stats> {
    return (yield { op: 'lstat', path }) as Stats;
  },
  *readdir(path: string): Walk<Listed[]> {
    return (yield { op: 'readdir', path }) as Listed[];
  },
  *unlink(path: string): Walk<void> {
    yield { op: 'unlink', path };
  },
  *rmdir(path: string): Walk<void> {
    yield { op: 'rmdir', path };
  },
};

/** Closes a descriptor a walk opened (a directory's or a local file's close does not block). */
export function closeFd(fd: number): void {
  closeSync(fd);
}
