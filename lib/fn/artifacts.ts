/**
 * The host side of the `deleteRunArtifacts` operation: reads the function's store credentials
 * (a Secret, through the function's own client), checks that they are bound to the Run's store,
 * and deletes the Run's prefix, derived only from namespace and UID with the key function the
 * uploads use. Retry versus terminal is decided by `deletionFailure` (pure).
 */
import { notCovered, parseGcSecret, s3ClientOptions, type GcCredentials } from '../artifacts/gc-credentials.ts';
import { ArtifactKeyError, runKeyPrefix } from '../artifacts/keys.ts';
import type { KubeClient } from '../kube/client.ts';
import { isApiError } from '../kube/errors.ts';
import type { KubeObject } from '../kube/types.ts';
import { TerminalError, TransientError } from './errors.ts';
import type { DeleteRunArtifactsOp } from './types.ts';

/** Bound of one deletion attempt; a slower store is retried with backoff. */
export const DELETE_TIMEOUT_MS = 30_000;

export interface ArtifactDeps {
  /** Deletes everything under `prefix` with these credentials; nothing there is success. */
  deletePrefix(
    creds: GcCredentials,
    store: DeleteRunArtifactsOp['store'],
    prefix: string,
    signal: AbortSignal,
  ): Promise<void>;
  timeoutMs?: number;
}

/** The S3 SDK (~30 MB) is loaded on the first deletion only, not by every function host. */
export const defaultArtifactDeps: ArtifactDeps = {
  deletePrefix: async (creds, store, prefix, signal) => {
    const [{ S3Client }, { deleteS3Prefix }] = await Promise.all([
      import('@aws-sdk/client-s3'),
      import('../artifacts/s3-delete.ts'),
    ]);
    const s3 = new S3Client({
      ...s3ClientOptions({
        region: creds.region ?? store.region ?? 'us-east-1',
        ...(creds.endpoint ? { endpoint: creds.endpoint } : {}),
        forcePathStyle: store.forcePathStyle === true,
      }),
      credentials: {
        accessKeyId: creds.accessKeyId,
        secretAccessKey: creds.secretAccessKey,
        ...(creds.sessionToken ? { sessionToken: creds.sessionToken } : {}),
      },
    });
    try {
      await deleteS3Prefix(s3, store.bucket, prefix, signal);
    } finally {
      s3.destroy();
    }
  },
};

/** What a failure of the operation means: terminal only when the key cannot be derived. Pure. */
export function deletionFailure(err: unknown, where: string): TerminalError | TransientError {
  if (err instanceof TerminalError || err instanceof TransientError) return err;
  if (err instanceof ArtifactKeyError)
    return new TerminalError(err.reason, `refusing to delete artifacts: ${err.message}`);
  const message = err instanceof Error ? err.message : String(err);
  return new TransientError(`cannot delete the artifacts under ${where}: ${message}`);
}

/** Reads a Secret by path; rejects with the API error (404 included). */
export type SecretReader = (path: string) => Promise<KubeObject & { data?: Record<string, string> }>;

async function credentialsFor(read: SecretReader, op: DeleteRunArtifactsOp): Promise<GcCredentials> {
  const { namespace, name } = op.credentials;
  const secret = await read(`/api/v1/namespaces/${namespace}/secrets/${name}`).catch((err: unknown) => {
    if (isApiError(err, 404)) throw new TransientError(`store credentials Secret ${namespace}/${name} not found`);
    throw err;
  });
  const creds = parseGcSecret(secret.data);
  if ('problem' in creds) throw new TransientError(creds.problem);
  const why = notCovered(creds, op.store);
  if (why) throw new TransientError(`not deleting with ${namespace}/${name}: ${why}`);
  return creds;
}

/** The operation with its Secret read injected; resolves when nothing of the Run is left in the store. */
export async function deleteWith(read: SecretReader, op: DeleteRunArtifactsOp, deps: ArtifactDeps): Promise<void> {
  let where = `s3://${op.store.bucket}/`;
  try {
    const prefix = runKeyPrefix(op.store.prefix, op.namespace, op.runUID);
    where = `s3://${op.store.bucket}/${prefix}`;
    const creds = await credentialsFor(read, op);
    await deps.deletePrefix(creds, op.store, prefix, AbortSignal.timeout(deps.timeoutMs ?? DELETE_TIMEOUT_MS));
  } catch (err) {
    throw deletionFailure(err, where);
  }
}

/** Applies one deleteRunArtifacts operation with the function's own client. */
export function deleteRunArtifacts(
  client: KubeClient,
  op: DeleteRunArtifactsOp,
  deps: ArtifactDeps = defaultArtifactDeps,
): Promise<void> {
  return deleteWith((path) => client.get(path), op, deps);
}
