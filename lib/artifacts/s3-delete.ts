/**
 * Deleting everything under one Run's S3 prefix, shared by runtimed (its own store credentials)
 * and the run-artifact-gc function (its own least-privilege credentials). Idempotent: a prefix
 * with nothing under it, or a bucket that no longer exists, is a successful deletion.
 */
import { DeleteObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';

/** The part of an S3 client used here (tests pass a fake). */
export type S3Sender = Pick<S3Client, 'send'>;

export type DeleteOutcome = { kind: 'deleted'; keys: number } | { kind: 'gone' };

/** What a failed S3 call means for a deletion. */
export type StoreErrorClass = 'gone' | 'retry';

/**
 * `gone`: the thing to delete is not there (missing key or bucket), so the deletion is done;
 * `retry`: anything else (network, throttling, 5xx, denied credentials, which an administrator
 * may fix); the caller keeps its finalizer and tries again.
 */
export function classifyStoreError(err: unknown): StoreErrorClass {
  if (typeof err !== 'object' || err === null) return 'retry';
  const e = err as { name?: unknown; Code?: unknown; $metadata?: { httpStatusCode?: unknown } };
  const name = typeof e.name === 'string' ? e.name : typeof e.Code === 'string' ? e.Code : '';
  if (name === 'NoSuchKey' || name === 'NoSuchBucket' || name === 'NotFound') return 'gone';
  if (e.$metadata?.httpStatusCode === 404) return 'gone';
  return 'retry';
}

/**
 * Lists every key under `prefix` (all pages) first, then deletes them one by one, so paging never
 * skips keys. Keys the listing returns outside the prefix are ignored. `prefix` must come from
 * runKeyPrefix (it ends with '/').
 */
export async function deleteS3Prefix(
  s3: S3Sender,
  bucket: string,
  prefix: string,
  signal?: AbortSignal,
): Promise<DeleteOutcome> {
  if (!prefix.endsWith('/')) throw new Error(`refusing to delete under "${prefix}": not a run prefix`);
  const opts = signal ? { abortSignal: signal } : undefined;
  try {
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const page = await s3.send(
        new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }),
        opts,
      );
      for (const object of page.Contents ?? []) if (object.Key?.startsWith(prefix)) keys.push(object.Key);
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    for (const key of keys) {
      await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }), opts).catch((err: unknown) => {
        if (classifyStoreError(err) !== 'gone') throw err;
      });
    }
    return { kind: 'deleted', keys: keys.length };
  } catch (err) {
    if (classifyStoreError(err) === 'gone') return { kind: 'gone' };
    throw err;
  }
}
