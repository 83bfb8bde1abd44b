import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import fc from 'fast-check';
import { DigestMismatchError, VerifyingStream } from './verify.ts';

const sha = (b: Buffer): string => `sha256:${createHash('sha256').update(b).digest('hex')}`;

async function run(chunks: Buffer[], size: number, digest: string): Promise<{ out: Buffer; err?: unknown }> {
  const got: Buffer[] = [];
  const sink = new Writable({
    write(c: Buffer, _e, cb) {
      got.push(c);
      cb();
    },
  });
  try {
    await pipeline(Readable.from(chunks), new VerifyingStream(size, digest, 'artifact "x"'), sink);
  } catch (err) {
    return { out: Buffer.concat(got), err };
  }
  return { out: Buffer.concat(got) };
}

describe('VerifyingStream', () => {
  it('passes any chunking of the right bytes through unchanged', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.uint8Array({ minLength: 1, maxLength: 64 }), { maxLength: 8 }), async (arrs) => {
        const chunks = arrs.map((a) => Buffer.from(a));
        const all = Buffer.concat(chunks);
        const r = await run(chunks, all.length, sha(all));
        assert.equal(r.err, undefined);
        assert.deepEqual(r.out, all);
      }),
      { numRuns: 50 },
    );
  });

  it('never delivers the last chunk when the digest is wrong', async () => {
    const chunks = [Buffer.from('hello '), Buffer.from('world')];
    const r = await run(chunks, 11, sha(Buffer.from('hello there')));
    assert.ok(r.err instanceof DigestMismatchError);
    assert.match(r.err.message, /does not match the reference digest/);
    assert.ok(r.out.length < 11, `delivered ${r.out.length} of 11 bytes`);
  });

  it('refuses objects shorter or longer than the recorded size', async () => {
    const b = Buffer.from('abcdef');
    const short = await run([b], 7, sha(b));
    assert.match((short.err as Error).message, /has 6 bytes, its reference records 7/);
    assert.equal(short.out.length, 0);
    const long = await run([b, b], 6, sha(b));
    assert.match((long.err as Error).message, /larger than the 6 bytes/);
    assert.ok(long.out.length < 12);
  });
});
