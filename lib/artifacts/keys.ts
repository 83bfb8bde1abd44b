/**
 * Where a Run's artifacts live in an S3 store: `[<prefix>/]namespaces/<ns>/runs/<uid>/`. One key
 * function for everything that writes or deletes them (runtimed's uploads, its cleanup, and the
 * run-artifact-gc function), so a deletion can never name another prefix than the uploads used.
 */

/** A key that must not be derived: its reason is stable, the message names the bad part. */
export class ArtifactKeyError extends Error {
  readonly reason = 'ArtifactKeyInvalid';
  constructor(message: string) {
    super(message);
    this.name = 'ArtifactKeyError';
  }
}

/** Trims spaces and leading/trailing '/'; '' when unset. */
export function normalizePrefix(prefix: string | undefined): string {
  return (prefix ?? '').trim().replace(/^\/+|\/+$/g, '');
}

/** Why a (normalised) store prefix is unsafe: empty, '.' or '..' segments, backslashes or NULs; undefined when safe. */
export function prefixProblem(prefix: string): string | undefined {
  if (prefix === '') return undefined;
  if (/[\\\0]/.test(prefix)) return 'must not contain backslashes or NUL';
  if (prefix.split('/').some((s) => s === '' || s === '.' || s === '..'))
    return 'must not contain empty, "." or ".." segments';
  return undefined;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Whether a value can be one key segment: non-empty, not '.'/'..', no separators, well-formed Unicode. */
export function isSafeSegment(value: string): boolean {
  return value !== '' && value !== '.' && value !== '..' && !/[/\\\0]/.test(value) && !LONE_SURROGATE.test(value);
}

/** `<prefix>/namespaces/` (or `namespaces/`); throws ArtifactKeyError for an unsafe prefix. */
export function keyRoot(prefix: string | undefined): string {
  const p = normalizePrefix(prefix);
  const problem = prefixProblem(p);
  if (problem) throw new ArtifactKeyError(`s3 prefix "${p}" ${problem}`);
  return p ? `${p}/namespaces/` : 'namespaces/';
}

/**
 * `…/namespaces/<ns>/runs/<uid>/` with its trailing slash, so one UID never matches another's
 * prefix. Throws ArtifactKeyError when the namespace, the UID or the prefix could make the key
 * leave that place.
 */
export function runKeyPrefix(prefix: string | undefined, namespace: string, runUID: string): string {
  if (!isSafeSegment(namespace))
    throw new ArtifactKeyError(`run namespace "${namespace}" is not a safe path component`);
  if (!isSafeSegment(runUID)) throw new ArtifactKeyError(`run UID "${runUID}" is not a safe path component`);
  return `${keyRoot(prefix)}${namespace}/runs/${runUID}/`;
}
