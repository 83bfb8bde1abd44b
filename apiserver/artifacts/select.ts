/**
 * The pure part of artifacts.kruntimes.io: which reference a request names, what a listing
 * shows (no store locations), the response headers of a download, and the S3 credentials a
 * store's credentials Secret holds.
 */
import type { ArtifactRef } from '../../runtimed/artifacts/store.ts';

export interface ArtifactSummary { name: string; type: string; sizeBytes: number; digest?: string; contentType?: string; createdAt?: string; driver: string }
export interface S3Credentials { accessKeyId: string; secretAccessKey: string; sessionToken?: string }

/** A request that cannot be served, as a metav1.Status code, reason and message. */
export class ArtifactRequestError extends Error {
  constructor(readonly code: number, readonly reason: string, message: string) { super(message); this.name = 'ArtifactRequestError'; }
}

export function summarize(refs: readonly ArtifactRef[]): ArtifactSummary[] {
  return refs.map((r) => ({
    name: r.name, type: r.type, sizeBytes: r.sizeBytes, driver: r.driver, ...(r.digest ? { digest: r.digest } : {}),
    ...(r.contentType ? { contentType: r.contentType } : {}), ...(r.createdAt ? { createdAt: r.createdAt } : {}),
  }));
}

export type VerifiableRef = ArtifactRef & { digest: string };

/** The reference called `name` in the Run's status (404 lists what exists); one without a digest cannot be verified and is refused. */
export function pickRef(refs: readonly ArtifactRef[], name: string, run: string): VerifiableRef {
  const ref = refs.find((r) => r.name === name);
  if (ref?.digest) return { ...ref, digest: ref.digest };
  if (ref) throw new ArtifactRequestError(409, 'Conflict', `artifact ${JSON.stringify(name)} of Run ${run} has no recorded sha256 digest, so its bytes cannot be verified; it is not served`);
  const known = refs.map((r) => r.name);
  const hint = known.length ? `; it has ${known.map((n) => JSON.stringify(n)).join(', ')}` : '; it has no artifacts (yet)';
  throw new ArtifactRequestError(404, 'NotFound', `Run ${run} has no artifact ${JSON.stringify(name)}${hint}`);
}

/** Bytes of a directory artifact are its tar.gz; a file is served as stored. */
export function downloadFilename(ref: ArtifactRef): string {
  return ref.type === 'directory' ? `${ref.name}.tar.gz` : ref.name;
}

export function downloadHeaders(ref: VerifiableRef): Record<string, string> {
  return {
    'Content-Type': ref.type === 'directory' ? 'application/gzip' : (ref.contentType || 'application/octet-stream'),
    'Content-Length': String(ref.sizeBytes),
    'Content-Disposition': `attachment; filename*=UTF-8''${encodeURIComponent(downloadFilename(ref))}`,
    'X-Kruntimes-Artifact-Digest': ref.digest,
    'X-Kruntimes-Artifact-Type': ref.type,
    'Cache-Control': 'no-store',
  };
}

/** AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (/ AWS_SESSION_TOKEN) of a Secret's base64 data, as runtimed gets them via envFrom. */
export function s3Credentials(data: Record<string, string> | undefined, secret: string): S3Credentials {
  const get = (k: string): string | undefined => { const v = data?.[k]; return v ? Buffer.from(v, 'base64').toString('utf8') : undefined; };
  const accessKeyId = get('AWS_ACCESS_KEY_ID');
  const secretAccessKey = get('AWS_SECRET_ACCESS_KEY');
  if (!accessKeyId || !secretAccessKey) {
    throw new ArtifactRequestError(500, 'InternalError', `the artifact store credentials Secret ${secret} has no AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; fix the Secret the Runtime's spec.artifactStore.s3.credentialsSecretName names`);
  }
  const sessionToken = get('AWS_SESSION_TOKEN');
  return { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) };
}
