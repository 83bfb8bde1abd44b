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
