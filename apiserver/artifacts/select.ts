/**
 * The pure part of artifacts.kruntimes.io: which reference a request names, what a listing
 * shows (no store locations) and the response headers of a download.
 */
import type { ArtifactRef } from '../../runtimed/artifacts/store.ts';

export interface ArtifactSummary {
  name: string;
  type: string;
  sizeBytes: number;
  digest?: string;
  contentType?: string;
  createdAt?: string;
  driver: string;
}

/** A request that cannot be served, as a metav1.Status code, reason and message. */
export class ArtifactRequestError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
    this.name = 'ArtifactRequestError';
  }
}

export function summarize(refs: readonly ArtifactRef[]): ArtifactSummary[] {
  return refs.map((r) => ({
    name: r.name,
    type: r.type,
    sizeBytes: r.sizeBytes,
    driver: r.driver,
    ...(r.digest ? { digest: r.digest } : {}),
    ...(r.contentType ? { contentType: r.contentType } : {}),
    ...(r.createdAt ? { createdAt: r.createdAt } : {}),
  }));
}

export type VerifiableRef = ArtifactRef & { digest: string };

/** The reference called `name` in the Run's status (404 lists what exists); one without a digest cannot be verified and is refused. */
export function pickRef(refs: readonly ArtifactRef[], name: string, run: string): VerifiableRef {
  const ref = refs.find((r) => r.name === name);
  if (ref?.digest) return { ...ref, digest: ref.digest };
  if (ref)
    throw new ArtifactRequestError(
      409,
      'Conflict',
      `artifact ${JSON.stringify(name)} of Run ${run} has no recorded sha256 digest, so its bytes cannot be verified; it is not served`,
    );
  const known = refs.map((r) => r.name);
  const hint = known.length
    ? `; it has ${known.map((n) => JSON.stringify(n)).join(', ')}`
    : '; it has no artifacts (yet)';
  throw new ArtifactRequestError(404, 'NotFound', `Run ${run} has no artifact ${JSON.stringify(name)}${hint}`);
}

/** Bytes of a directory artifact are its tar.gz; a file is served as stored. */
export function downloadFilename(ref: ArtifactRef): string {
  return ref.type === 'directory' ? `${ref.name}.tar.gz` : ref.name;
}

export function downloadHeaders(ref: VerifiableRef): Record<string, string> {
  return {
    'Content-Type': ref.type === 'directory' ? 'application/gzip' : ref.contentType || 'application/octet-stream',
    'Content-Length': String(ref.sizeBytes),
    'Content-Disposition': `attachment; filename*=UTF-8''${encodeURIComponent(downloadFilename(ref))}`,
    'X-Kruntimes-Artifact-Digest': ref.digest,
    'X-Kruntimes-Artifact-Type': ref.type,
    'Cache-Control': 'no-store',
  };
}
