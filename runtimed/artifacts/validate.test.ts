import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { isArtifactError } from './errors.ts';
import { canonicalStoreSpec, storeHash, type ArtifactRef, type RuntimeArtifactStoreSpec } from './store.ts';
import { makeTmp, rejects, writeTree } from './test-support.ts';
import {
  MAX_ARTIFACT_REFS,
  artifactNameProblem,
  collectStaged,
  relativePathProblem,
  runArtifactPath,
  validateArtifactRef,
} from './validate.ts';

const GOOD_REF: ArtifactRef = {
  name: 'dist.tgz',
  driver: 'filesystem',
  type: 'file',
  sizeBytes: 3,
  digest: `sha256:${'a'.repeat(64)}`,
  contentType: 'application/gzip',
  createdAt: '2026-07-06T12:00:00Z',
  location: { filesystem: { path: 'namespaces/ns/runs/u/dist.tgz', volumeClaimName: 'c' } },
};

describe('runtimed/artifacts names and references', () => {
  it('validates artifact names like upstream ValidateName', () => {
    assert.equal(artifactNameProblem('dist.tgz'), undefined);
    assert.equal(artifactNameProblem('日本語 name'), undefined);
    assert.equal(artifactNameProblem(''), 'artifact name is required');
    assert.equal(artifactNameProblem('\ud800'), 'artifact name must be valid UTF-8');
    assert.equal(artifactNameProblem('é'.repeat(128)), 'artifact name exceeds 255 bytes');
    assert.equal(artifactNameProblem('x'.repeat(255)), undefined);
    for (const bad of ['.', '..', 'a/b', 'a\\b', '/'])
      assert.match(artifactNameProblem(bad) ?? '', /must not contain path separators/);
  });

  it('builds the shared layout path and rejects unsafe components', () => {
    assert.equal(runArtifactPath('ns', 'uid', 'a'), 'namespaces/ns/runs/uid/a');
    for (const [ns, uid, name] of [
      ['', 'u', 'a'],
      ['n', '..', 'a'],
      ['n', 'u', '..'],
      ['a/b', 'u', 'x'],
    ] as const) {
      assert.throws(
        () => runArtifactPath(ns, uid, name),
        (e: unknown) => isArtifactError(e, 'ArtifactInvalid'),
      );
    }
  });

  it('checks store-relative paths', () => {
    assert.equal(relativePathProblem('a/b'), undefined);
    for (const bad of ['', '/a', 'a/../b', 'a//b', './a', 'a\\b']) assert.ok(relativePathProblem(bad), bad);
  });

  it('accepts a well-formed reference and returns a clean copy', () => {
    assert.deepEqual(validateArtifactRef({ ...GOOD_REF, extra: 'dropped' }), GOOD_REF);
    const s3: ArtifactRef = {
      ...GOOD_REF,
      driver: 's3',
      location: { s3: { bucket: 'b', key: 'namespaces/ns/runs/u/x' } },
    };
    assert.deepEqual(validateArtifactRef(s3), s3);
  });

  it('rejects malformed references with ArtifactInputInvalid', () => {
    const bad: [unknown, RegExp][] = [
      [null, /must be an object/],
      [[], /must be an object/],
      [{}, /name is required/],
      [
        { ...GOOD_REF, name: '../x' },
        /invalid artifact reference: artifact name "..\/x" must not contain path separators/,
      ],
      [{ ...GOOD_REF, driver: 'gcs' }, /unsupported artifact driver "gcs"/],
      [{ ...GOOD_REF, type: 'tar' }, /unsupported artifact type "tar"/],
      [{ ...GOOD_REF, sizeBytes: -1 }, /sizeBytes must be a non-negative integer/],
      [{ ...GOOD_REF, sizeBytes: '3' }, /sizeBytes must be a non-negative integer/],
      [{ ...GOOD_REF, digest: 'md5:abc' }, /digest must be sha256/],
      [{ ...GOOD_REF, location: undefined }, /location is required/],
      [
        { ...GOOD_REF, location: { filesystem: { path: '../etc/passwd' } } },
        /must not contain empty, "." or ".." segments/,
      ],
      [{ ...GOOD_REF, location: { filesystem: { path: '/etc/passwd' } } }, /must be a relative path/],
      [
        { ...GOOD_REF, location: { filesystem: { path: 'a' }, s3: { bucket: 'b', key: 'k' } } },
        /only a filesystem location/,
      ],
      [{ ...GOOD_REF, driver: 's3' }, /only an s3 location/],
      [{ ...GOOD_REF, driver: 's3', location: { s3: { bucket: '', key: 'k' } } }, /bucket and key are required/],
    ];
    for (const [ref, message] of bad) {
      assert.throws(
        () => validateArtifactRef(ref),
        (e: unknown) => {
          assert.ok(isArtifactError(e, 'ArtifactInputInvalid'), String(e));
          assert.match(e.message, message);
          return true;
        },
      );
    }
  });

  it('never throws anything but an ArtifactError on arbitrary JSON', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.jsonValue(),
          fc.record({ name: fc.string(), driver: fc.constantFrom('filesystem', 's3'), location: fc.jsonValue() }),
        ),
        (v) => {
          try {
            validateArtifactRef(v);
          } catch (err) {
            assert.ok(isArtifactError(err), String(err));
          }
        },
      ),
      { numRuns: 1000 },
    );
  });
});

describe('runtimed/artifacts storeHash', () => {
  it('hashes the Go JSON form: struct field order, empty optional fields omitted', () => {
    const fsSpec: RuntimeArtifactStoreSpec = { driver: 'filesystem', filesystem: { volumeClaimName: 'artifacts' } };
    const expected = createHash('sha256')
      .update('{"driver":"filesystem","filesystem":{"volumeClaimName":"artifacts"}}')
      .digest('hex')
      .slice(0, 16);
    assert.equal(storeHash(fsSpec), expected);
    assert.match(storeHash(fsSpec), /^[0-9a-f]{16}$/);
    const s3: RuntimeArtifactStoreSpec = {
      s3: {
        uploadConcurrency: 4,
        forcePathStyle: true,
        endpoint: 'http://minio:9000',
        region: '',
        prefix: 'p',
        bucket: 'b',
        uploadPartSize: 0,
      },
      driver: 's3',
    };
    assert.equal(
      JSON.stringify(canonicalStoreSpec(s3)),
      '{"driver":"s3","s3":{"bucket":"b","prefix":"p","endpoint":"http://minio:9000","forcePathStyle":true,"uploadConcurrency":4}}',
    );
  });

  it('does not depend on key order and changes with any field', () => {
    const a: RuntimeArtifactStoreSpec = { driver: 's3', s3: { bucket: 'b', prefix: 'p', credentialsSecretName: 's' } };
    const b = JSON.parse(
      '{"s3":{"credentialsSecretName":"s","prefix":"p","bucket":"b"},"driver":"s3"}',
    ) as RuntimeArtifactStoreSpec;
    assert.equal(storeHash(a), storeHash(b));
    assert.notEqual(
      storeHash(a),
      storeHash({ driver: 's3', s3: { bucket: 'b', prefix: 'q', credentialsSecretName: 's' } }),
    );
  });
});

describe('runtimed/artifacts collectStaged', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await makeTmp('staged');
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('lists top-level files and directories in byte order with their sizes', async () => {
    await writeTree(dir, { 'b.txt': 'bb', B: 'B', 'a/x': 'xyz', 'a/y/z': 'z', é: 'e' });
    const staged = await collectStaged(dir);
    assert.deepEqual(
      staged.map((s) => [s.name, s.type, s.sizeBytes]),
      [
        ['B', 'file', 1],
        ['a', 'directory', 4],
        ['b.txt', 'file', 2],
        ['é', 'file', 1],
      ],
    );
    assert.equal(staged[0]?.path, join(dir, 'B'));
  });

  it('treats a missing or empty staging directory as no artifacts', async () => {
    assert.deepEqual(await collectStaged(join(dir, 'missing')), []);
    assert.deepEqual(await collectStaged(dir), []);
  });

  it('refuses a staging directory replaced by a symlink (no export of files outside it)', async () => {
    await writeTree(join(dir, 'secrets'), { token: 'secret' });
    await symlink(join(dir, 'secrets'), join(dir, 'artifacts'));
    await rejects(
      collectStaged(join(dir, 'artifacts')),
      'ArtifactInvalid',
      /staging directory must be a directory, not a symbolic link/,
    );
  });

  it(`rejects more than ${MAX_ARTIFACT_REFS} entries`, async () => {
    for (let i = 0; i <= MAX_ARTIFACT_REFS; i++) await writeFile(join(dir, `f${i}`), '');
    await rejects(collectStaged(dir), 'ArtifactInvalid', /^artifact count 33 exceeds limit 32$/);
  });

  it('rejects symlinks and special files at the top and inside directories, naming them', async () => {
    await writeFile(join(dir, 'target'), 't');
    await symlink(join(dir, 'target'), join(dir, 'link'));
    await rejects(collectStaged(dir), 'ArtifactInvalid', /^artifact "link": symbolic links are not allowed$/);
    await rm(join(dir, 'link'));
    await mkdir(join(dir, 'd/sub'), { recursive: true });
    await symlink('/etc', join(dir, 'd/sub/etc'));
    await rejects(collectStaged(dir), 'ArtifactInvalid', /^artifact "d": "sub\/etc": symbolic links are not allowed$/);
    await rm(join(dir, 'd'), { recursive: true });
    execFileSync('mkfifo', [join(dir, 'pipe')]);
    await rejects(collectStaged(dir), 'ArtifactInvalid', /^artifact "pipe": special files are not allowed$/);
  });

  it('rejects names that are not valid UTF-8', async () => {
    await writeFile(Buffer.concat([Buffer.from(`${dir}/bad-`), Buffer.from([0xff])]), 'x');
    await rejects(collectStaged(dir), 'ArtifactInvalid', /name is not valid UTF-8/);
  });

  it('enforces per-artifact, per-Run and entry limits', async () => {
    await writeTree(dir, {
      a: 'x'.repeat(61),
      '0dir/one': 'y'.repeat(30),
      '0dir/two': 'z'.repeat(30),
      c: 'w'.repeat(50),
    });
    await rejects(
      collectStaged(dir, { maxArtifactBytes: 59 }),
      'ArtifactInvalid',
      /^artifact "0dir": size exceeds 59 bytes$/,
    );
    await rejects(
      collectStaged(dir, { maxArtifactBytes: 60 }),
      'ArtifactInvalid',
      /^artifact "a": size 61 exceeds 60 bytes$/,
    );
    await rejects(
      collectStaged(dir, { maxRunBytes: 150 }),
      'ArtifactInvalid',
      /^total artifact size exceeds 150 bytes$/,
    );
    await rejects(collectStaged(dir, { maxEntries: 1 }), 'ArtifactInvalid', /^artifact "0dir": more than 1 entries$/);
    assert.deepEqual(
      (await collectStaged(dir, { maxRunBytes: 171 })).map((s) => s.sizeBytes),
      [60, 61, 50],
    );
  });
});
