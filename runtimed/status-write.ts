/**
 * runtimed's status writes for a Run it executes: computed from the freshest Run, guarded by its
 * resourceVersion, retried on conflicts, and waiting out an API server that does not answer.
 *
 * The wait matters for exactly-once: a Run whose result could not be written stays Scheduled or
 * Running; if runtimed gave up and later restarted, or lost the Runtime Server's record of the
 * execution, that Run would be lost or executed a second time (the 30-minute soak, issue 18).
 * The loop ends when the write lands, the Run is gone, terminal or taken away, or on a definite
 * error (4xx other than a conflict).
 */
import { isApiError } from '../lib/kube/errors.ts';
import { untilAnswered } from '../lib/kube/retry.ts';
import { isTerminal, type RunStatus } from '../lib/run/phases.ts';
import { takenAway } from './fence.ts';
import type { Run } from './types.ts';

export interface StatusWriteDeps {
  /** PATCH runs/status with metadata.resourceVersion of `run`. */
  patch(run: Run, status: RunStatus): Promise<Run>;
  /** GET the Run; undefined when it is gone. */
  refetch(run: Run): Promise<Run | undefined>;
  /** Whether the Run is assigned to this Pod. */
  mine(run: Run): boolean;
  sleep?: (ms: number) => Promise<void>;
  /** Told once per retry while the API server does not answer. */
  onRetry?: (err: unknown, delayMs: number) => void;
}

export const CONFLICT_RETRIES = 5;

/** Writes `build(status)`; undefined when the Run is gone, already terminal, or was taken away. */
export async function writeRunStatus(
  d: StatusWriteDeps,
  a: { run: Run; lost?: boolean },
  build: (s: RunStatus) => RunStatus,
): Promise<Run | undefined> {
  const wait = { ...(d.sleep ? { sleep: d.sleep } : {}), ...(d.onRetry ? { onRetry: d.onRetry } : {}) };
  const answered = <T>(fn: () => Promise<T>): Promise<T> => untilAnswered(fn, { ...wait, stop: () => !!a.lost });
  for (let i = 0; i < CONFLICT_RETRIES; i++) {
    if (a.lost) return undefined;
    const status = build(a.run.status ?? {});
    try {
      const res = await answered(() => d.patch(a.run, status));
      a.run = res;
      return res;
    } catch (err) {
      if (!isApiError(err, 409)) {
        if (isApiError(err, 404)) return undefined;
        throw err;
      }
      const fresh = await answered(() => d.refetch(a.run));
      if (!fresh || isTerminal(fresh.status?.phase) || !d.mine(fresh)) return undefined;
      if (takenAway(a.run, fresh)) {
        a.lost = true;
        return undefined;
      }
      a.run = fresh;
    }
  }
  throw new Error(`status write for ${a.run.metadata.name}: too many conflicts`);
}
