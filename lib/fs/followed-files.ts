/**
 * Files a long-lived server reloads when they change (serving certificates and CA bundles mounted
 * from Secrets), polled by content. Not fs.watchFile: it compares with a first stat it takes
 * asynchronously after it starts, so a file rotated before that stat went unseen until the next
 * rotation. The first contents are read here and callers load from `contents`, so no change can
 * fall between a caller's read and the poll's.
 */
import { readFileSync } from 'node:fs';

export class FollowedFiles {
  private current: Buffer[];
  private readonly timer: NodeJS.Timeout;
  /** The last read error reported, so a missing file is reported once, not at every poll. */
  private failing = '';

  /** Reads the files (throws when one cannot be read), then polls them every intervalMs. */
  constructor(
    readonly files: string[],
    intervalMs: number,
    private readonly onChange: (contents: Buffer[]) => void,
    private readonly onError: (err: unknown) => void = () => undefined,
  ) {
    this.current = files.map((f) => readFileSync(f));
    // Unreferenced: the poll never keeps a process alive.
    this.timer = setInterval(() => this.check(), intervalMs).unref();
  }

  /** The contents last read, in the order of `files`. */
  get contents(): Buffer[] {
    return this.current;
  }

  private check(): void {
    let next: Buffer[];
    try {
      next = this.files.map((f) => readFileSync(f));
    } catch (err) {
      const msg = err instanceof Error ? err.message : String(err);
      if (msg !== this.failing) this.onError(err);
      this.failing = msg;
      return;
    }
    this.failing = '';
    if (next.every((b, i) => b.equals(this.current[i]!))) return;
    this.current = next;
    this.onChange(next);
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
