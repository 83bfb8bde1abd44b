import assert from 'node:assert/strict';
import type { ArtifactRef } from '../../runtimed/artifacts/store.ts';
import { ArtifactRequestError, downloadHeaders, pickRef, summarize } from './select.ts';

const ref = (name: string, type: 'file' | 'directory'): ArtifactRef & { digest: string } => ({
  name,
  type,
  driver: 's3',
  sizeBytes: 12,
  digest: `sha256:${'a'.repeat(64)}`,
  contentType: 'text/plain; charset=utf-8',
  createdAt: '2026-01-01T00:00:00Z',
  location: { s3: { bucket: 'b', key: `namespaces/ns/runs/u/${name}` } },
});

describe('artifact selection', () => {
  it('lists references without their store locations', () => {
    const [s] = summarize([ref('dist.txt', 'file')]);
    assert.deepEqual(Object.keys(s ?? {}).sort(), [
      'contentType',
      'createdAt',
      'digest',
      'driver',
      'name',
      'sizeBytes',
      'type',
    ]);
  });

  it('picks a reference by name, or answers 404 naming what exists', () => {
    const refs = [ref('dist.txt', 'file'), ref('site', 'directory')];
    assert.equal(pickRef(refs, 'site', 'ns/r').name, 'site');
    assert.throws(
      () => pickRef(refs, 'nope', 'ns/r'),
      (e: unknown) => e instanceof ArtifactRequestError && e.code === 404 && /has "dist.txt", "site"/.test(e.message),
    );
    assert.throws(() => pickRef([], 'x', 'ns/r'), /has no artifacts/);
    const { digest: _d, ...bare } = ref('old', 'file');
    assert.throws(
      () => pickRef([bare], 'old', 'ns/r'),
      (e: unknown) =>
        e instanceof ArtifactRequestError && e.code === 409 && /no recorded sha256 digest/.test(e.message),
    );
  });

  it('serves directories as tar.gz with size and digest headers', () => {
    const h = downloadHeaders(ref('site', 'directory'));
    assert.equal(h['Content-Type'], 'application/gzip');
    assert.equal(h['Content-Length'], '12');
    assert.match(h['Content-Disposition'] ?? '', /filename\*=UTF-8''site\.tar\.gz$/);
    assert.equal(h['X-Kruntimes-Artifact-Digest'], `sha256:${'a'.repeat(64)}`);
    assert.equal(
      downloadHeaders(ref('a b.txt', 'file'))['Content-Disposition'],
      "attachment; filename*=UTF-8''a%20b.txt",
    );
  });
});
