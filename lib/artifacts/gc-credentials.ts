/**
 * The run-artifact-gc function's own store credentials: a Secret in the platform namespace that
 * only that function's ServiceAccount may read (RBAC by resourceName). It is bound to one store:
 * the credentials are used only for a Run whose store snapshot names the same bucket and the same
 * endpoint, so a Runtime that points its store at a server of its choosing never receives them.
 */

/** Where a Run's bytes are (the S3 part of its status.artifactStore snapshot). */
export interface S3Location {
  bucket: string;
  prefix?: string;
  endpoint?: string;
  region?: string;
  forcePathStyle?: boolean;
}

export interface GcCredentials {
  bucket: string;
  /** '' for AWS itself (no custom endpoint). */
  endpoint: string;
  region?: string;
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export const GC_SECRET_NAME = 'kruntimes-artifact-gc';

const decode = (v: string | undefined): string => (v ? Buffer.from(v, 'base64').toString('utf8').trim() : '');
const trimEndpoint = (e: string | undefined): string => (e ?? '').trim().replace(/\/+$/, '');

/** The credentials of the Secret's `data` (base64, as the API returns it), or why they are unusable. */
export function parseGcSecret(data: Record<string, string> | undefined): GcCredentials | { problem: string } {
  const d = data ?? {};
  const bucket = decode(d.bucket);
  const accessKeyId = decode(d.AWS_ACCESS_KEY_ID);
  const secretAccessKey = decode(d.AWS_SECRET_ACCESS_KEY);
  if (!bucket || !accessKeyId || !secretAccessKey)
    return { problem: `Secret ${GC_SECRET_NAME} needs the keys bucket, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY` };
  const region = decode(d.region);
  const sessionToken = decode(d.AWS_SESSION_TOKEN);
  return {
    bucket,
    endpoint: trimEndpoint(decode(d.endpoint)),
    accessKeyId,
    secretAccessKey,
    ...(region ? { region } : {}),
    ...(sessionToken ? { sessionToken } : {}),
  };
}

/** Why these credentials must not be used for this store (undefined: they cover it). Fail closed. */
export function notCovered(creds: Pick<GcCredentials, 'bucket' | 'endpoint'>, store: S3Location): string | undefined {
  if (store.bucket !== creds.bucket)
    return `bucket ${store.bucket} is not the bucket ${creds.bucket} of ${GC_SECRET_NAME}`;
  const endpoint = trimEndpoint(store.endpoint);
  if (endpoint !== creds.endpoint)
    return `endpoint ${endpoint || '(AWS)'} is not the endpoint ${creds.endpoint || '(AWS)'} of ${GC_SECRET_NAME}`;
  return undefined;
}

/** S3 client options for a store: with a custom endpoint, checksums only where S3 requires them. */
export function s3ClientOptions(o: { region: string; endpoint?: string; forcePathStyle?: boolean }): {
  region: string;
  forcePathStyle: boolean;
  endpoint?: string;
  requestChecksumCalculation?: 'WHEN_REQUIRED';
  responseChecksumValidation?: 'WHEN_REQUIRED';
} {
  return {
    region: o.region,
    forcePathStyle: o.forcePathStyle === true,
    ...(o.endpoint
      ? {
          endpoint: o.endpoint,
          requestChecksumCalculation: 'WHEN_REQUIRED' as const,
          responseChecksumValidation: 'WHEN_REQUIRED' as const,
        }
      : {}),
  };
}
