/** What the function handlers of the Runtime Server share (functions.ts, bash-worker.ts). */
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { isAbsolute, join, normalize } from 'node:path';
import type { Duplex } from 'node:stream';

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

const FAILURE_REASONS = new Set(['FunctionError', 'Cancelled', 'OutputTooLarge', 'Busy', 'NotRegistered']);

/**
 * Pure: one answer line as an InvokeResult. The line may come from a process that runs the
 * function's code (the python worker answers runtimed directly), so anything that is not a
 * well-formed result is a FunctionError, never trusted as-is.
 */
export function parseInvokeResult(line: string): InvokeResult {
  let m: unknown;
  try {
    m = JSON.parse(line);
  } catch {
    return { ok: false, reason: 'FunctionError', error: 'the function answered a line that is not JSON' };
  }
  const r = (m && typeof m === 'object' ? m : {}) as Record<string, unknown>;
  if (r.ok === true) return { ok: true, output: r.output ?? null };
  if (r.ok === false && typeof r.reason === 'string' && FAILURE_REASONS.has(r.reason) && typeof r.error === 'string')
    return { ok: false, reason: r.reason as 'FunctionError', error: r.error };
  return { ok: false, reason: 'FunctionError', error: 'the function answered a malformed result' };
}

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

/** What a JSON text can start with (after white space): an object, array, string, number or literal. */
const JSON_START = /^\s*[[{"\d\-tfn]/;

/** A call's stdout as its output: JSON when it parses, the text (without the final newline) otherwise. */
export function outputValue(stdout: string): unknown {
  const text = stdout.replace(/\n$/, '');
  // Plain text (most bash output) cannot be JSON: no parse error thrown and caught per call.
  if (!JSON_START.test(text)) return text;
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

/** How a function is registered. */
export interface RegisterOptions {
  /**
   * runtimed opens the function's call channel right after registering, and a handler whose
   * channel goes to a worker of its own (bash) checks the handler there instead of in a worker of
   * its own first (which would source the file twice).
   */
  channelFollows?: boolean;
}

/** A language's handler of one registered function. */
export interface Handler {
  register(opts?: RegisterOptions): Promise<void>;
  invoke(payload: string): Promise<InvokeResult>;
  /** Kills the in-flight call. */
  cancel(): void;
  /** Unregistered: the in-flight call and any worker end. */
  close(): void;
  /**
   * Takes over an upgraded call channel (the 101 is written by the taker); false when this
   * handler does not serve channels itself (the Runtime Server then serves it line by line).
   * `serve` is that service, for a taker that finds only later that it cannot take the channel.
   */
  handOff?(socket: Duplex, head: Buffer, serve: () => void): boolean;
  /** The execution lease was renewed: a handler that serves calls itself learns the new deadline. */
  leaseRenewed?(): void;
  /** The tail of the last call's stderr (bash: runtimed asks for it when a call on its channel failed). */
  lastStderr?(): Promise<string>;
}

/** How the Runtime Server's handlers serve calls. */
export interface HandlerOptions {
  /** Hand each call channel to the warm worker (default; python and bash); false keeps the Runtime Server on the call path. */
  handOff: boolean;
  /** bash: run each call in a fresh subshell of the warm worker (per-call shell state) instead of in the worker itself. */
  bashSubshells: boolean;
  /** The execution lease's deadline in CLOCK_MONOTONIC nanoseconds (process.hrtime), undefined when not armed. */
  leaseDeadline: () => bigint | undefined;
  /** What is left of the execution lease in ms, undefined when not armed (bash workers read it from a file). */
  leaseRemainingMs: () => number | undefined;
}
