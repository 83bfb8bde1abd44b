/** Streaming sha256 + byte count with an optional hard limit, for stored and downloaded bytes. */
import { createHash, type Hash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';

export class DigestStream extends Transform {
  private readonly hash: Hash = createHash('sha256');
  private count = 0;

  /** `onLimit` builds the error raised when more than `maxBytes` bytes pass through. */
  constructor(
    private readonly maxBytes = Infinity,
    private readonly onLimit: () => Error = () => new Error(`stream exceeds ${maxBytes} bytes`),
  ) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.count += chunk.length;
    if (this.count > this.maxBytes) {
      cb(this.onLimit());
      return;
    }
    this.hash.update(chunk);
    cb(null, chunk);
  }

  get bytes(): number {
    return this.count;
  }

  /** `sha256:<hex>`; call once, after the stream finished. */
  digest(): string {
    return `sha256:${this.hash.digest('hex')}`;
  }
}
