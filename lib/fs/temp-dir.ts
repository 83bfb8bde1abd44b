/** Temporary directories for tests and their helpers, removed when the process exits (nothing left in /tmp). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const made = new Set<string>();
let armed = false;

/** Removes `dir` (recursively) when the process exits, however the test run ends short of a signal. */
export function removeAtExit(dir: string): void {
  made.add(dir);
  if (armed) return;
  armed = true;
  process.once('exit', () => {
    for (const d of made) rmSync(d, { recursive: true, force: true });
  });
}

/** A new directory under the system temporary directory, named `prefix` + random, removed at exit. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  removeAtExit(dir);
  return dir;
}
