/** Run-keyed log records on runtimed's stdout, one JSON object per output line (upstream §2.8 fields). */
import type { Run } from './types.ts';

export interface LogContext {
  pod: string;
  runtime: string;
}

export function logRecord(
  run: Run,
  ctx: LogContext,
  rec: { stream: string; line: string; time: string; seq: number },
  attempt: number,
): string {
  return `${JSON.stringify({
    time: rec.time,
    run_uid: run.metadata.uid,
    run_name: run.metadata.name,
    namespace: run.metadata.namespace,
    runtime: ctx.runtime,
    pod: ctx.pod,
    stream: rec.stream,
    message: rec.line,
    attempt,
    seq: rec.seq,
  })}\n`;
}

/**
 * The end-of-log marker of one attempt, written after its last output record: a follower of the
 * Run's log knows it has everything once it has read the marker of the Run's final attempt. It
 * has no `message`, so readers of output records skip it.
 */
export function endRecord(run: Run, ctx: LogContext, attempt: number, time: string): string {
  return `${JSON.stringify({
    time,
    run_uid: run.metadata.uid,
    run_name: run.metadata.name,
    namespace: run.metadata.namespace,
    runtime: ctx.runtime,
    pod: ctx.pod,
    end: true,
    attempt,
  })}\n`;
}

/** Pending log text written at once whatever the turn (a long Run's output is not held). */
export const BATCH_BYTES = 64 * 1024;

/**
 * Log records written once per turn of the event loop: the records of a burst of Runs go to the
 * container's stdout pipe in one write(2), which wakes its reader (the node agent) once, instead
 * of one write each (issue 17). `flush` writes what is pending now (runtimed stops, or exits).
 */
export function batchedWriter(
  write: (s: string) => void,
  later: (fn: () => void) => void = setImmediate,
): { write: (s: string) => void; flush: () => void } {
  let pending = '';
  let armed = false;
  const flush = (): void => {
    armed = false;
    if (!pending) return;
    const s = pending;
    pending = '';
    write(s);
  };
  return {
    write: (s) => {
      pending += s;
      if (pending.length >= BATCH_BYTES) flush();
      else if (!armed) {
        armed = true;
        later(flush);
      }
    },
    flush,
  };
}
