/**
 * A pass-through stream that proves stored bytes match their reference: it counts and hashes
 * what passes and holds back the latest chunk until the end, so when the size or sha256 digest
 * is wrong the last bytes are never sent and the (Content-Length framed) response stays
 * visibly incomplete instead of looking like a good download.
 */
import { createHash, type Hash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';

export class DigestMismatchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DigestMismatchError';
  }
}

export class VerifyingStream extends Transform {
  private readonly hash: Hash = createHash('sha256');
  private count = 0;
  private held: Buffer | undefined;

  constructor(
    private readonly expectedSize: number,
    private readonly expectedDigest: string,
    private readonly label: string,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.count += chunk.length;
    if (this.count > this.expectedSize) {
      cb(
        new DigestMismatchError(
          `${this.label}: stored object is larger than the ${this.expectedSize} bytes its reference records`,
        ),
      );
      return;
    }
    this.hash.update(chunk);
    const prev = this.held;
    this.held = chunk;
    cb(null, prev);
  }

  override _flush(cb: TransformCallback): void {
    if (this.count !== this.expectedSize) {
      cb(
        new DigestMismatchError(
          `${this.label}: stored object has ${this.count} bytes, its reference records ${this.expectedSize}`,
        ),
      );
      return;
    }
    const digest = `sha256:${this.hash.digest('hex')}`;
    if (digest !== this.expectedDigest) {
      cb(
        new DigestMismatchError(
          `${this.label}: stored object digest ${digest} does not match the reference digest ${this.expectedDigest}`,
        ),
      );
      return;
    }
    cb(null, this.held);
  }
}
