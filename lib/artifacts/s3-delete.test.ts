import assert from 'node:assert/strict';
import { DeleteObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { classifyStoreError, deleteS3Prefix, type S3Sender } from './s3-delete.ts';

/** An in-memory bucket answering the two commands used, with pages of `pageSize` keys. */
function fakeBucket(
  keys: string[],
  pageSize = 2,
  fail?: (cmd: unknown) => Error | undefined,
): S3Sender & { keys: Set<string> } {
  const store = new Set(keys);
  const send = (cmd: unknown): Promise<unknown> => {
    const err = fail?.(cmd);
    if (err) return Promise.reject(err);
    if (cmd instanceof ListObjectsV2Command) {
      const all = [...store].filter((k) => k.startsWith(cmd.input.Prefix ?? '')).sort();
      const start = Number(cmd.input.ContinuationToken ?? 0);
      const page = all.slice(start, start + pageSize);
      const more = start + pageSize < all.length;
      // A server ignoring the prefix filter must not make us delete elsewhere: add a foreign key.
      return Promise.resolve({
        Contents: [...page, 'other/key'].map((Key) => ({ Key })),
        IsTruncated: more,
        ...(more ? { NextContinuationToken: String(start + pageSize) } : {}),
      });
    }
    if (cmd instanceof DeleteObjectCommand) {
      store.delete(cmd.input.Key ?? '');
      return Promise.resolve({});
    }
    return Promise.reject(new Error('unexpected command'));
  };
  return { send: send as S3Sender['send'], keys: store };
}

const err = (name: string, status?: number): Error =>
  Object.assign(new Error(name), { name, ...(status ? { $metadata: { httpStatusCode: status } } : {}) });

describe('lib/artifacts deleteS3Prefix', () => {
  it('deletes every key under the prefix across pages, nothing else', async () => {
    const p = 'e2e/namespaces/ns/runs/u1/';
    const b = fakeBucket([`${p}a`, `${p}b`, `${p}c/d`, `${p}e`, 'e2e/namespaces/ns/runs/u10/x', 'other/key']);
    assert.deepEqual(await deleteS3Prefix(b, 'bkt', p), { kind: 'deleted', keys: 4 });
    assert.deepEqual([...b.keys].sort(), ['e2e/namespaces/ns/runs/u10/x', 'other/key']);
  });

  it('is idempotent: an empty prefix, a missing key or a missing bucket is success', async () => {
    const p = 'namespaces/ns/runs/u1/';
    assert.deepEqual(await deleteS3Prefix(fakeBucket([]), 'bkt', p), { kind: 'deleted', keys: 0 });
    const vanishing = fakeBucket([`${p}a`], 2, (c) =>
      c instanceof DeleteObjectCommand ? err('NoSuchKey', 404) : undefined,
    );
    assert.deepEqual(await deleteS3Prefix(vanishing, 'bkt', p), { kind: 'deleted', keys: 1 });
    const noBucket = fakeBucket([], 2, () => err('NoSuchBucket', 404));
    assert.deepEqual(await deleteS3Prefix(noBucket, 'bkt', p), { kind: 'gone' });
  });

  it('rejects on any other failure so the caller keeps its finalizer and retries', async () => {
    const p = 'namespaces/ns/runs/u1/';
    const denied = fakeBucket([`${p}a`], 2, (c) =>
      c instanceof DeleteObjectCommand ? err('AccessDenied', 403) : undefined,
    );
    await assert.rejects(deleteS3Prefix(denied, 'bkt', p), /AccessDenied/);
    assert.equal(denied.keys.size, 1);
  });

  it('refuses a prefix that is not a run prefix', async () => {
    await assert.rejects(deleteS3Prefix(fakeBucket(['a']), 'bkt', 'namespaces/ns/runs/u1'), /not a run prefix/);
  });

  it('classifies store errors: missing things are gone, everything else is retried', () => {
    assert.equal(classifyStoreError(err('NoSuchKey')), 'gone');
    assert.equal(classifyStoreError(err('NoSuchBucket')), 'gone');
    assert.equal(classifyStoreError(err('Whatever', 404)), 'gone');
    assert.equal(classifyStoreError(err('AccessDenied', 403)), 'retry');
    assert.equal(classifyStoreError(err('InternalError', 500)), 'retry');
    assert.equal(classifyStoreError(new Error('socket hang up')), 'retry');
    assert.equal(classifyStoreError('x'), 'retry');
  });
});
