import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import fc from 'fast-check';
import { ArtifactError, isArtifactError } from './errors.ts';
import { createArtifactStore, FilesystemArtifactStore } from './index.ts';
import { S3ArtifactStore } from './s3-store.ts';
import { BLOCK, decodeHeader, encodeHeader, parseNumeric, parsePax, splitUstarName } from './tar.ts';
import { makeTmp, paxRecord } from './test-support.ts';

/** Decodes what encodeHeader wrote, applying a GNU long name when present. */
function decodeAll(buf: Buffer): { name: string; typeflag: string; size: number; mode: number } {
  const first = decodeHeader(buf.subarray(0, BLOCK));
  assert.ok(typeof first !== 'string', typeof first === 'string' ? first : '');
  if (first.typeflag !== 'L')
    return { name: first.path.toString('utf8'), typeflag: first.typeflag, size: first.size, mode: first.mode };
  const long = buf.subarray(BLOCK, BLOCK + first.size - 1).toString('utf8');
  const next = decodeHeader(buf.subarray(buf.length - BLOCK));
  assert.ok(typeof next !== 'string');
  return { name: long, typeflag: next.typeflag, size: next.size, mode: next.mode };
}

describe('runtimed/artifacts tar codec', () => {
  it('round-trips names of any length through ustar prefix/name or a GNU long name', () => {
    const seg = fc.stringMatching(/^[a-zé日._-]{1,60}$/);
    fc.assert(
      fc.property(
        fc.array(seg, { minLength: 1, maxLength: 12 }),
        fc.boolean(),
        fc.nat({ max: 1e9 }),
        (segs, dir, size) => {
          const name = segs.join('/') + (dir ? '/' : '');
          const h = decodeAll(encodeHeader({ name, kind: dir ? 'dir' : 'file', mode: dir ? 0o755 : 0o644, size }));
          assert.deepEqual(h, { name, typeflag: dir ? '5' : '0', size: dir ? 0 : size, mode: dir ? 0o755 : 0o644 });
        },
      ),
      { numRuns: 500 },
    );
  });

  it('splits at a slash only when both parts fit', () => {
    assert.equal(splitUstarName(Buffer.from('a'.repeat(100)))?.prefix.length, 0);
    const split = splitUstarName(Buffer.from(`${'p'.repeat(150)}/${'n'.repeat(100)}`));
    assert.equal(split?.prefix.toString(), 'p'.repeat(150));
    assert.equal(splitUstarName(Buffer.from('x'.repeat(101))), undefined);
    assert.equal(splitUstarName(Buffer.from(`${'p'.repeat(156)}/n`)), undefined);
  });

  it('encodes sizes beyond 8 GiB in GNU base-256 and parses them back', () => {
    const size = 2 ** 40 + 5;
    const h = decodeHeader(encodeHeader({ name: 'huge', kind: 'file', mode: 0o644, size }));
    assert.ok(typeof h !== 'string');
    assert.equal(h.size, size);
    const neg = Buffer.alloc(12, 0xff);
    assert.equal(parseNumeric(neg, 0, 12), undefined);
    assert.equal(parseNumeric(Buffer.from(' 17 \0'), 0, 5), 15);
    assert.equal(parseNumeric(Buffer.from('9\0'), 0, 2), undefined);
  });

  it('reports malformed headers and PAX records', () => {
    const block = encodeHeader({ name: 'f', kind: 'file', mode: 0o644, size: 1 });
    const bad = Buffer.from(block);
    bad[0] = 0x67;
    assert.equal(decodeHeader(bad), 'invalid header checksum');
    const sizeBad = Buffer.from(block);
    sizeBad.write('zzzzzzzzzzz\0', 124, 'latin1');
    assert.equal(decodeHeader(sizeBad), 'invalid header checksum');
    assert.deepEqual(
      [...parsePax(Buffer.from(paxRecord('path', 'a=b') + paxRecord('size', '12')))].map(([k, v]) => [k, v.toString()]),
      [
        ['path', 'a=b'],
        ['size', '12'],
      ],
    );
    for (const bad of ['5 a=b\n', '6 ab\n\n', 'x path=a\n', '11 path=a\n'])
      assert.throws(() => parsePax(Buffer.from(bad)), /malformed extended header/);
  });
});

describe('runtimed/artifacts createArtifactStore', () => {
  it('builds the store the spec names and rejects inconsistent specs', async () => {
    const root = await makeTmp('factory');
    try {
      const fs = await createArtifactStore(
        { driver: 'filesystem', filesystem: { volumeClaimName: 'c' } },
        { filesystemRoot: root, maxArtifactBytes: 10 },
      );
      assert.ok(fs instanceof FilesystemArtifactStore);
      const s3 = await createArtifactStore({ driver: 's3', s3: { bucket: 'b', region: 'eu-1' } });
      // The S3 store module is imported on demand (tsx may load it as a second instance).
      assert.equal(s3.constructor.name, S3ArtifactStore.name);
      for (const bad of [
        null,
        { driver: 'filesystem' },
        { driver: 'filesystem', filesystem: { volumeClaimName: 'c' }, s3: { bucket: 'b' } },
        { driver: 'gcs' },
      ]) {
        await assert.rejects(createArtifactStore(bad as never, { filesystemRoot: root }), (e: unknown) =>
          isArtifactError(e, 'ArtifactStoreConfigInvalid'),
        );
      }
      assert.equal(new ArtifactError('ArtifactStoreError', 'x').transient, true);
      assert.equal(new ArtifactError('ArtifactInvalid', 'x').transient, false);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
