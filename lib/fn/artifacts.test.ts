import assert from 'node:assert/strict';
import { DeleteObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { ApiError } from '../kube/errors.ts';
import { ArtifactKeyError } from '../artifacts/keys.ts';
import { deleteS3Prefix, type S3Sender } from '../artifacts/s3-delete.ts';
import type { KubeClient } from '../kube/client.ts';
import { executeOperations } from './execute.ts';
import { R } from './resources.ts';
import { deleteWith, deletionFailure, type ArtifactDeps, type SecretReader } from './artifacts.ts';
import { TerminalError, TransientError } from './errors.ts';
import type { DeleteRunArtifactsOp, Operation } from './types.ts';

const op = (over: Partial<DeleteRunArtifactsOp> = {}): DeleteRunArtifactsOp => ({
  op: 'deleteRunArtifacts',
  store: { bucket: 'b', prefix: 'e2e', endpoint: 'http://s3:9000' },
  namespace: 'ns',
  runUID: 'u1',
  credentials: { namespace: 'kruntimes-system', name: 'kruntimes-artifact-gc' },
  ...over,
});
const b64 = (v: string): string => Buffer.from(v).toString('base64');
const secret: SecretReader = () =>
  Promise.resolve({
    metadata: { name: 'kruntimes-artifact-gc' },
    data: {
      bucket: b64('b'),
      endpoint: b64('http://s3:9000'),
      AWS_ACCESS_KEY_ID: b64('k'),
      AWS_SECRET_ACCESS_KEY: b64('s'),
    },
  });

function deps(keys: Set<string>, fail?: Error): ArtifactDeps & { used: number } {
  const send = ((cmd: unknown) => {
    if (fail) return Promise.reject(fail);
    if (cmd instanceof ListObjectsV2Command)
      return Promise.resolve({ Contents: [...keys].map((Key) => ({ Key })), IsTruncated: false });
    if (cmd instanceof DeleteObjectCommand) keys.delete(cmd.input.Key ?? '');
    return Promise.resolve({});
  }) as S3Sender['send'];
  const d = {
    used: 0,
    deletePrefix: async (_c: unknown, store: { bucket: string }, prefix: string, signal: AbortSignal) => {
      d.used++;
      await deleteS3Prefix({ send }, store.bucket, prefix, signal);
    },
  };
  return d;
}

describe('lib/fn deleteRunArtifacts operation', () => {
  it("deletes the Run's prefix with the bound credentials", async () => {
    const keys = new Set(['e2e/namespaces/ns/runs/u1/a', 'e2e/namespaces/ns/runs/u2/a']);
    await deleteWith(secret, op(), deps(keys));
    assert.deepEqual([...keys], ['e2e/namespaces/ns/runs/u2/a']);
  });

  it('is terminal for a key that must not be derived, before reading any credential', async () => {
    const d = deps(new Set());
    let read = 0;
    const counting: SecretReader = (p) => (read++, secret(p));
    for (const bad of [
      op({ runUID: '..' }),
      op({ namespace: 'a/b' }),
      op({ store: { bucket: 'b', prefix: 'x/../y' } }),
    ])
      await assert.rejects(
        deleteWith(counting, bad, d),
        (e: unknown) => e instanceof TerminalError && e.reason === 'ArtifactKeyInvalid',
      );
    assert.equal(read + d.used, 0);
  });

  it('is transient (retried, finalizer kept) when the Secret is missing, does not cover the store, or the store fails', async () => {
    const missing: SecretReader = () => Promise.reject(new ApiError(404, undefined, 'not found'));
    await assert.rejects(
      deleteWith(missing, op(), deps(new Set())),
      (e: unknown) => e instanceof TransientError && /not found/.test(e.message),
    );
    const d = deps(new Set());
    await assert.rejects(
      deleteWith(secret, op({ store: { bucket: 'b', endpoint: 'http://evil:9000' } }), d),
      (e: unknown) => e instanceof TransientError && /endpoint http:\/\/evil:9000 is not/.test(e.message),
    );
    assert.equal(d.used, 0, 'the credentials never reach a store they are not bound to');
    const down = Object.assign(new Error('InternalError'), { $metadata: { httpStatusCode: 500 } });
    await assert.rejects(
      deleteWith(secret, op(), deps(new Set(), down)),
      (e: unknown) =>
        e instanceof TransientError && /s3:\/\/b\/e2e\/namespaces\/ns\/runs\/u1\/: InternalError/.test(e.message),
    );
  });

  it('maps failures: typed errors kept, key errors terminal, everything else transient', () => {
    const t = new TerminalError('X', 'x');
    assert.equal(deletionFailure(t, 'w'), t);
    assert.ok(deletionFailure(new ArtifactKeyError('bad'), 'w') instanceof TerminalError);
    assert.ok(deletionFailure(new Error('boom'), 'w') instanceof TransientError);
    assert.ok(deletionFailure('str', 'w') instanceof TransientError);
  });

  it('keeps the finalizer: a failed deletion stops the operations after it (executeOperations applies in order)', async () => {
    const calls: string[] = [];
    // Only the two calls this sequence can make; the Secret GET fails as a missing Secret does.
    const client = {
      get: (path: string) => {
        calls.push(`get ${path}`);
        return Promise.reject(new ApiError(404, undefined, 'not found'));
      },
      patch: (path: string) => {
        calls.push(`patch ${path}`);
        return Promise.resolve({ metadata: {} });
      },
    } as unknown as KubeClient;
    const patch: Operation = {
      op: 'patch',
      resource: R.runs,
      namespace: 'ns',
      name: 'r',
      patch: { metadata: { finalizers: [] } },
    };
    await assert.rejects(executeOperations(client, 'run-artifact-gc', [op(), patch]), TransientError);
    assert.deepEqual(calls, ['get /api/v1/namespaces/kruntimes-system/secrets/kruntimes-artifact-gc']);
  });
});
