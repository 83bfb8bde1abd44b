/**
 * The one error type of the artifact layer. `reason` is stable (it becomes a Run condition
 * reason); `message` is for humans and names the artifact, entry or limit involved.
 */

export type ArtifactReason =
  /** A produced artifact breaks the rules (name, type, count, size): the Run fails, no retry. */
  | 'ArtifactInvalid'
  /** An artifact input (reference, destination path, archive content, digest) is unusable: the Run fails. */
  | 'ArtifactInputInvalid'
  /** An artifact input's destination already exists with different content: the Run fails, nothing is replaced. */
  | 'ArtifactInputConflict'
  /** The referenced artifact does not exist in the store. */
  | 'ArtifactNotFound'
  /** The store could not be reached or failed (I/O, network): the same operation may succeed later. */
  | 'ArtifactStoreError'
  /** The store configuration itself is unusable. */
  | 'ArtifactStoreConfigInvalid';

const PERMANENT_ERRNO = new Set(['EACCES', 'EPERM', 'EROFS']);

export class ArtifactError extends Error {
  readonly reason: ArtifactReason;

  constructor(reason: ArtifactReason, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ArtifactError';
    this.reason = reason;
  }

  /**
   * Transient store failures are retried (requeue) instead of failing the Run. A store that
   * refuses runtimed's user (EACCES, EPERM) or is read-only (EROFS) refuses every retry too:
   * that is not transient, and retrying it kept a finished Run Running forever (a hostPath
   * volume a real kubelet mounts without the Pod's fsGroup).
   */
  get transient(): boolean {
    return this.reason === 'ArtifactStoreError' && !PERMANENT_ERRNO.has(errnoCode(this.cause) ?? '');
  }
}

export function isArtifactError(err: unknown, reason?: ArtifactReason): err is ArtifactError {
  return err instanceof ArtifactError && (reason === undefined || err.reason === reason);
}

/** The errno code of a Node system error, if it is one. */
export function errnoCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  return typeof err.code === 'string' ? err.code : undefined;
}

/** Short description of any thrown value, for messages. */
export function describeError(err: unknown): string {
  const code = errnoCode(err);
  if (code && /^E[A-Z]+$/.test(code)) return code;
  if (err instanceof Error) return err.message;
  return String(err);
}

/** Quotes a user-supplied name for a message, bounded so Run messages stay short. */
export function quoteName(name: string, max = 200): string {
  return JSON.stringify(name.length > max ? `${name.slice(0, max)}…` : name);
}

/** Re-throws ArtifactErrors unchanged and wraps anything else with the given reason and context. */
export function asArtifactError(err: unknown, reason: ArtifactReason, context: string): ArtifactError {
  if (err instanceof ArtifactError) return err;
  return new ArtifactError(reason, `${context}: ${describeError(err)}`, { cause: err });
}
