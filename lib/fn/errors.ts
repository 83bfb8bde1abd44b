/** Typed handler errors: they decide retry versus terminal. */

/** Not retried: the input is wrong and only a change of it helps. */
export class TerminalError extends Error {
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
    this.name = 'TerminalError';
  }
}

/** Not ready yet: retried after retryAfterMs without counting as an error. */
export class WaitingError extends Error {
  constructor(
    readonly reason: string,
    message: string,
    readonly retryAfterMs = 5000,
  ) {
    super(message);
    this.name = 'WaitingError';
  }
}

/** A temporary failure: retried with jittered exponential backoff. */
export class TransientError extends Error {
  constructor(
    message: string,
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = 'TransientError';
  }
}
