/** Typed OpenSandbox API failures. Messages never contain the API key or request bodies. */

export type OpenSandboxErrorKind =
  | 'unauthorized'
  | 'forbidden'
  | 'not-found'
  | 'conflict'
  | 'rate-limited'
  | 'invalid'
  | 'server'
  | 'network'
  | 'timeout'
  | 'protocol';

export class OpenSandboxError extends Error {
  constructor(
    readonly kind: OpenSandboxErrorKind,
    message: string,
    readonly details: {
      status?: number;
      /** The server's machine-readable code (ErrorResponse.code), e.g. KUBERNETES::POOL_CAPACITY_EXHAUSTED. */
      code?: string;
      /** From Retry-After (seconds) on 429/5xx. */
      retryAfterMs?: number;
      /** The request may have taken effect (sent, but no definite answer): creates must not be repeated blindly. */
      outcomeUnknown?: boolean;
    } = {},
  ) {
    super(message);
    this.name = 'OpenSandboxError';
  }

  get status(): number | undefined {
    return this.details.status;
  }
  get code(): string | undefined {
    return this.details.code;
  }
  get retryAfterMs(): number | undefined {
    return this.details.retryAfterMs;
  }
  get outcomeUnknown(): boolean {
    return this.details.outcomeUnknown ?? false;
  }
}

export function isOpenSandboxError(err: unknown, kind?: OpenSandboxErrorKind): err is OpenSandboxError {
  return err instanceof OpenSandboxError && (kind === undefined || err.kind === kind);
}

export function kindOfStatus(status: number): OpenSandboxErrorKind {
  switch (status) {
    case 400:
    case 422:
      return 'invalid';
    case 401:
      return 'unauthorized';
    case 403:
      return 'forbidden';
    case 404:
      return 'not-found';
    case 409:
      return 'conflict';
    case 429:
      return 'rate-limited';
    default:
      return status >= 500 ? 'server' : 'protocol';
  }
}

/** Retry-After as delay seconds or an HTTP date; undefined when absent or unparsable. */
export function parseRetryAfter(value: string | undefined, now: number): number | undefined {
  if (!value) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
