/** Typed errors of the Kubernetes API layer: the HTTP status decides retry versus terminal. */

export interface StatusBody {
  kind?: string;
  status?: string;
  message?: string;
  reason?: string;
  code?: number;
  details?: unknown;
}

/** An error answer of the API server, carrying its metav1.Status when it sent one. */
export class ApiError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly status: StatusBody | undefined;

  constructor(code: number, status: StatusBody | undefined, fallback: string) {
    super(status?.message ?? fallback);
    this.name = 'ApiError';
    this.code = code;
    this.reason = status?.reason ?? reasonForCode(code);
    this.status = status;
  }

  get notFound(): boolean {
    return this.code === 404;
  }
  get conflict(): boolean {
    return this.code === 409;
  }
  get gone(): boolean {
    return this.code === 410;
  }
  get invalid(): boolean {
    return this.code === 422;
  }
  get forbidden(): boolean {
    return this.code === 403;
  }
  /** 429, 5xx: the same request may succeed later. */
  get transient(): boolean {
    return this.code === 429 || this.code >= 500;
  }
}

export function reasonForCode(code: number): string {
  const reasons: Record<number, string> = {
    400: 'BadRequest',
    401: 'Unauthorized',
    403: 'Forbidden',
    404: 'NotFound',
    405: 'MethodNotAllowed',
    409: 'Conflict',
    410: 'Expired',
    415: 'UnsupportedMediaType',
    422: 'Invalid',
    429: 'TooManyRequests',
    500: 'InternalError',
    503: 'ServiceUnavailable',
    504: 'Timeout',
  };
  return reasons[code] ?? (code >= 500 ? 'InternalError' : 'Unknown');
}

export function isApiError(err: unknown, code?: number): err is ApiError {
  return err instanceof ApiError && (code === undefined || err.code === code);
}
