import assert from 'node:assert/strict';
import fc from 'fast-check';
import { prefixProblem } from '../../lib/artifacts/keys.ts';
import { isArtifactError } from './errors.ts';
import {
  MIN_UPLOAD_PART_SIZE,
  S3ArtifactStore,
  buildS3Ref,
  encodeMetadataValue,
  keyRoot,
  normalizePrefix,
  objectKey,
  objectMetadata,
  ownedS3Location,
  resolveS3Config,
  runKeyPrefix,
  s3ClientConfig,
  type S3StoreConfig,
} from './s3-store.ts';
import type { ArtifactRef } from './store.ts';
import { validateArtifactRef } from './validate.ts';

const throwsReason = (fn: () => unknown, reason: string, message: RegExp): void => {
  assert.throws(fn, (e: unknown) => {
    assert.ok(isArtifactError(e), String(e));
    assert.equal(e.reason, reason);
    assert.match(e.message, message);
    return true;
  });
};

const CFG: S3StoreConfig = {
  bucket: 'bkt',
  prefix: 'team/a',
  region: 'us-east-1',
  forcePathStyle: true,
  partSize: MIN_UPLOAD_PART_SIZE,
  concurrency: 5,
};

describe('runtimed/artifacts S3 keys', () => {
  it('normalises the prefix by trimming spaces and slashes', () => {
    assert.equal(normalizePrefix(undefined), '');
    assert.equal(normalizePrefix('  /a/b//  '), 'a/b');
    assert.equal(normalizePrefix('///'), '');
    assert.equal(keyRoot(' /p/ '), 'p/namespaces/');
    assert.equal(keyRoot(''), 'namespaces/');
  });

  it('builds [<prefix>/]namespaces/<ns>/runs/<uid>/<name>', () => {
    assert.equal(objectKey('', 'ns', 'uid', 'dist.tgz'), 'namespaces/ns/runs/uid/dist.tgz');
    assert.equal(objectKey('/artifacts/', 'ns', 'uid', 'a b'), 'artifacts/namespaces/ns/runs/uid/a b');
    assert.equal(runKeyPrefix('x', 'ns', 'uid'), 'x/namespaces/ns/runs/uid/');
  });

  it('rejects unsafe components and keys longer than S3 allows', () => {
    throwsReason(() => objectKey('', 'ns', 'uid', '../x'), 'ArtifactInvalid', /must not contain path separators/);
    throwsReason(
      () => objectKey('', 'a/b', 'uid', 'x'),
      'ArtifactInvalid',
      /run namespace "a\/b" is not a safe path component/,
    );
    throwsReason(() => runKeyPrefix('', 'ns', ''), 'ArtifactInvalid', /run UID "" is not a safe path component/);
    throwsReason(
      () => objectKey('p'.repeat(1000), 'ns', 'uid', 'x'.repeat(100)),
      'ArtifactInvalid',
      /object key exceeds 1024 bytes/,
    );
  });

  it('refuses prefixes with empty, "." or ".." segments (uploads and deletions share the key function)', () => {
    for (const p of ['a/../b', 'a//b', './a', 'a/..', 'a\\b'])
      throwsReason(() => runKeyPrefix(p, 'ns', 'uid'), 'ArtifactStoreConfigInvalid', /s3 prefix .* must not contain/);
    throwsReason(() => resolveS3Config({ bucket: 'b', prefix: 'x/../y' }), 'ArtifactStoreConfigInvalid', /".."/);
  });

  it('keeps every key of one Run under its run prefix and out of every other Run prefix', () => {
    const safePrefix = fc.string({ maxLength: 10 }).filter((p) => prefixProblem(normalizePrefix(p)) === undefined);
    const seg = fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,10}$/);
    fc.assert(
      fc.property(safePrefix, seg, seg, seg, seg, (prefix, ns, uid, other, name) => {
        const key = objectKey(prefix, ns, uid, name);
        assert.ok(key.startsWith(runKeyPrefix(prefix, ns, uid)));
        assert.ok(key.startsWith(keyRoot(prefix)));
        if (other !== uid) assert.ok(!key.startsWith(runKeyPrefix(prefix, ns, other)));
      }),
      { numRuns: 300 },
    );
  });
});

describe('runtimed/artifacts S3 configuration', () => {
  it('resolves a spec with defaults and the region fallback chain', () => {
    assert.deepEqual(resolveS3Config({ bucket: 'b' }, {}), {
      bucket: 'b',
      prefix: '',
      region: 'us-east-1',
      forcePathStyle: false,
      partSize: MIN_UPLOAD_PART_SIZE,
      concurrency: 5,
    });
    assert.equal(resolveS3Config({ bucket: 'b' }, { AWS_REGION: 'eu-west-1' }).region, 'eu-west-1');
    assert.equal(resolveS3Config({ bucket: 'b', region: 'ap-1' }, { AWS_REGION: 'eu-west-1' }).region, 'ap-1');
    const full = resolveS3Config(
      {
        bucket: 'b',
        prefix: '/p/',
        endpoint: 'http://minio:9000',
        forcePathStyle: true,
        uploadPartSize: 8 * 1024 * 1024,
        uploadConcurrency: 2,
      },
      {},
    );
    assert.deepEqual(full, {
      bucket: 'b',
      prefix: 'p',
      region: 'us-east-1',
      endpoint: 'http://minio:9000',
      forcePathStyle: true,
      partSize: 8 * 1024 * 1024,
      concurrency: 2,
    });
  });

  it('rejects unusable specs with ArtifactStoreConfigInvalid', () => {
    throwsReason(() => resolveS3Config(undefined), 'ArtifactStoreConfigInvalid', /configuration is required/);
    throwsReason(() => resolveS3Config({ bucket: ' ' }), 'ArtifactStoreConfigInvalid', /bucket is required/);
    throwsReason(
      () => resolveS3Config({ bucket: 'a/b' }),
      'ArtifactStoreConfigInvalid',
      /must not contain path separators/,
    );
    throwsReason(
      () => resolveS3Config({ bucket: 'b', endpoint: 'minio:9000' }),
      'ArtifactStoreConfigInvalid',
      /invalid s3 endpoint "minio:9000"/,
    );
    throwsReason(
      () => resolveS3Config({ bucket: 'b', endpoint: 'ftp://x' }),
      'ArtifactStoreConfigInvalid',
      /invalid s3 endpoint/,
    );
    throwsReason(
      () => resolveS3Config({ bucket: 'b', uploadPartSize: 1024 }),
      'ArtifactStoreConfigInvalid',
      /part size must be an integer of at least 5242880/,
    );
    throwsReason(
      () => resolveS3Config({ bucket: 'b', uploadConcurrency: -1 }),
      'ArtifactStoreConfigInvalid',
      /concurrency must be an integer of at least 1/,
    );
    throwsReason(
      () => S3ArtifactStore.fromSpec({ driver: 's3', filesystem: { volumeClaimName: 'x' } }),
      'ArtifactStoreConfigInvalid',
      /requires exactly an s3 configuration/,
    );
  });

  it('derives client options: default credential chain, endpoint and path style', () => {
    assert.deepEqual(s3ClientConfig({ ...CFG, forcePathStyle: false }), { region: 'us-east-1', forcePathStyle: false });
    assert.deepEqual(s3ClientConfig({ ...CFG, endpoint: 'http://minio:9000' }), {
      region: 'us-east-1',
      forcePathStyle: true,
      endpoint: 'http://minio:9000',
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
    const store = S3ArtifactStore.fromSpec(
      { driver: 's3', s3: { bucket: 'b', endpoint: 'http://127.0.0.1:1' } },
      { env: {} },
    );
    assert.equal(store.driver, 's3');
    assert.equal(store.config.bucket, 'b');
  });
});

describe('runtimed/artifacts S3 references and metadata', () => {
  it('builds references that pass reference validation', () => {
    const ref = buildS3Ref({
      name: 'dist',
      type: 'directory',
      bucket: 'bkt',
      key: objectKey('team/a', 'ns', 'uid', 'dist'),
      sizeBytes: 10,
      digest: `sha256:${'f'.repeat(64)}`,
      contentType: 'application/gzip',
      createdAt: '2026-07-06T12:00:00Z',
    });
    assert.deepEqual(ref.location, { s3: { bucket: 'bkt', key: 'team/a/namespaces/ns/runs/uid/dist' } });
    assert.deepEqual(validateArtifactRef(ref), ref);
    assert.deepEqual(ownedS3Location(ref, CFG, { namespace: 'ns' }), {
      bucket: 'bkt',
      key: 'team/a/namespaces/ns/runs/uid/dist',
      label: 'artifact "dist"',
    });
  });

  it('refuses references of another bucket, prefix, namespace or driver', () => {
    const ref: ArtifactRef = buildS3Ref({
      name: 'f',
      type: 'file',
      bucket: 'bkt',
      key: 'team/a/namespaces/ns/runs/u/f',
      sizeBytes: 1,
      digest: '',
      contentType: 'x',
      createdAt: '',
    });
    const at = (bucket: string, key: string): ArtifactRef => ({ ...ref, location: { s3: { bucket, key } } });
    throwsReason(
      () => ownedS3Location(at('other', ref.location.s3?.key ?? ''), CFG),
      'ArtifactInputInvalid',
      /bucket "other" does not match the configured bucket "bkt"/,
    );
    throwsReason(
      () => ownedS3Location(at('bkt', 'team/b/namespaces/ns/runs/u/f'), CFG),
      'ArtifactInputInvalid',
      /outside the configured prefix/,
    );
    throwsReason(
      () => ownedS3Location(at('bkt', 'team/a/namespaces/nsx/runs/u/f'), CFG, { namespace: 'ns' }),
      'ArtifactInputInvalid',
      /another namespace than "ns"/,
    );
    for (const key of [
      'team/a/namespaces/ns/../nsx/runs/u/f',
      'team/a/namespaces/ns/runs/u/../../../nsx/runs/v/f',
      'team/a/namespaces/ns//runs/u/f',
      'team/a/namespaces/ns/runs/u/./f',
      'team/a/namespaces/ns/runs/u/f\\..',
    ]) {
      throwsReason(
        () => ownedS3Location(at('bkt', key), CFG, { namespace: 'ns' }),
        'ArtifactInputInvalid',
        /s3 key must (not contain empty, "\." or "\.\." segments|be a relative path)/,
      );
    }
    throwsReason(
      () => ownedS3Location({ ...ref, driver: 'filesystem', location: { filesystem: { path: 'a' } } }, CFG),
      'ArtifactInputInvalid',
      /not an s3 artifact/,
    );
  });

  it('records provenance metadata with header-safe values', () => {
    const m = objectMetadata({
      namespace: 'ns',
      runUID: 'u',
      runName: 'build',
      runtime: 'bash',
      name: 'résumé.pdf',
      type: 'file',
      digest: 'sha256:ab',
    });
    assert.deepEqual(m, {
      'kruntimes-run-name': 'build',
      'kruntimes-run-uid': 'u',
      'kruntimes-namespace': 'ns',
      'kruntimes-runtime': 'bash',
      'kruntimes-artifact-name': `=?UTF-8?B?${Buffer.from('résumé.pdf').toString('base64')}?=`,
      'kruntimes-artifact-type': 'file',
      'kruntimes-digest': 'sha256:ab',
    });
    assert.deepEqual(
      Object.keys(objectMetadata({ namespace: 'ns', runUID: 'u', name: 'a', type: 'directory', digest: 'd' })).sort(),
      [
        'kruntimes-artifact-name',
        'kruntimes-artifact-type',
        'kruntimes-digest',
        'kruntimes-namespace',
        'kruntimes-run-uid',
      ],
    );
    fc.assert(fc.property(fc.string(), (s) => assert.match(encodeMetadataValue(s), /^[\x20-\x7e]*$/)));
  });
});
