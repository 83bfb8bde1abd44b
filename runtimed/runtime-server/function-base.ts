/** What the function handlers of the Runtime Server share (functions.ts, bash-worker.ts). */
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { isAbsolute, join, normalize } from 'node:path';

/** Largest payload and output of one call (the gateway's limits). */
export const FUNCTION_IO_LIMIT = 1 << 20;
/** How long registration (a Python import) may take. */
export const REGISTER_TIMEOUT_MS = 30_000;

export interface FunctionSpec {
  id: string;
  handler: string;
  workingDir: string;
  env?: Record<string, string>;
}

export type InvokeResult =
  | { ok: true; output: unknown }
  | { ok: false; reason: 'FunctionError' | 'Cancelled' | 'OutputTooLarge' | 'Busy' | 'NotRegistered'; error: string };

export class RegistrationError extends Error {}

/** Splits `a.b.c` into (`a.b`, `c`); a clear RegistrationError when it has no dot. */
export function splitHandler(handler: string): { module: string; fn: string } {
  const i = handler.lastIndexOf('.');
  const module = i > 0 ? handler.slice(0, i) : '';
  const fn = i > 0 ? handler.slice(i + 1) : '';
  if (!module || !fn) throw new RegistrationError(`handler ${JSON.stringify(handler)} must be <file>.<function>`);
  return { module, fn };
}

/** The bash script of a `file.function` handler inside the working directory (`file` or `file.sh`). */
export function bashScript(workingDir: string, module: string, exists: (p: string) => boolean = existsSync): string {
  const rel = normalize(module);
  if (isAbsolute(rel) || rel.startsWith('..'))
    throw new RegistrationError(`handler file ${JSON.stringify(module)} must be inside the working directory`);
  for (const f of [rel, `${rel}.sh`]) if (exists(join(workingDir, f))) return join(workingDir, f);
  throw new RegistrationError(`handler file ${JSON.stringify(module)} (or ${module}.sh) not found`);
}

/** A call's stdout as its output: JSON when it parses, the text (without the final newline) otherwise. */
export function outputValue(stdout: string): unknown {
  const text = stdout.replace(/\n$/, '');
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

export function killGroup(child: ChildProcess | undefined): void {
  try {
    if (child?.pid) process.kill(-child.pid, 'SIGKILL');
  } catch {
    /* gone */
  }
}

/** A language's handler of one registered function. */
export interface Handler {
  register(): Promise<void>;
  invoke(payload: string): Promise<InvokeResult>;
  /** Kills the in-flight call. */
  cancel(): void;
  /** Unregistered: the in-flight call and any worker end. */
  close(): void;
}
