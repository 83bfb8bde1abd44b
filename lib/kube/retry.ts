/**
 * Retrying API calls that got no answer, or an answer that says "later". A client cut off from
 * kube-apiserver (killed, restarting, "the request has been made before all known HTTP paths
 * have been installed") sees connection errors and 5xx/429 for as long as the outage lasts; a
 * write that matters (a Run's terminal status) must wait it out rather than fail, or the work it
 * records is lost and may be done again.
 */
import { ApiError } from './errors.ts';
import { backoffMs } from './watch.ts';

/** Node's codes for a request that never got an HTTP answer. */
const NO_ANSWER = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'UND_ERR_SOCKET',
]);

/** Whether the same request may succeed if sent again: no answer at all, or 429/5xx. */
export function retriable(err: unknown): boolean {
  if (err instanceof ApiError) return err.transient;
  const code = (err as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string' && NO_ANSWER.has(code)) return true;
  return err instanceof Error && /socket hang up/i.test(err.message);
}

export interface BackoffOptions {
  /** First delay; doubled after each retriable failure up to maxMs. */
  baseMs?: number;
  maxMs?: number;
  sleep?: (ms: number) => Promise<void>;
  /** Checked before and after each wait: true gives up with the last error. */
  stop?: () => boolean;
  onRetry?: (err: unknown, delayMs: number) => void;
}

const realSleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Calls `fn` until it answers or fails with an error that is not retriable (then that error). */
export async function untilAnswered<T>(fn: () => Promise<T>, o: BackoffOptions = {}): Promise<T> {
  // The watch's backoff without its jitter: baseMs, doubled per failure, capped at maxMs.
  const delayOf = (attempt: number): number => backoffMs(attempt, o.baseMs ?? 200, o.maxMs ?? 5_000, () => 1);
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (!retriable(err) || o.stop?.()) throw err;
      const delay = delayOf(attempt);
      o.onRetry?.(err, delay);
      await (o.sleep ?? realSleep)(delay);
      if (o.stop?.()) throw err;
    }
  }
}
