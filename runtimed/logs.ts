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
