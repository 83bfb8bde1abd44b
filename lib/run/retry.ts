/** Retry policy semantics of Runs (upstream internal/retry). */
import { parseDuration } from './duration.ts';

export interface RetryPolicy {
  maxAttempts?: number;
  backoff?: string;
  retryableReasons?: string[];
}

export function currentAttempt(attempt: number | undefined): number {
  return attempt && attempt > 0 ? attempt : 1;
}

/** Delay before attempt `attempt` (2 = first retry = base backoff), doubling, capped at 60 s. */
export function backoffMs(policy: RetryPolicy | undefined, attempt: number): number {
  const base = parseDuration(policy?.backoff) || 1000;
  return Math.min(60_000, base * 2 ** Math.max(attempt - 2, 0));
}

export function shouldRetry(policy: RetryPolicy | undefined, attempt: number, reason: string): boolean {
  const max = policy?.maxAttempts && policy.maxAttempts > 0 ? policy.maxAttempts : 1;
  if (reason === 'Cancelled' || currentAttempt(attempt) >= max) return false;
  const only = policy?.retryableReasons ?? [];
  return only.length === 0 || only.includes(reason);
}
