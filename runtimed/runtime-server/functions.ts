/**
 * Function handlers of the Runtime Server (function-mode Runs, issue 15). A function is
 * registered once and then invoked many times, one call at a time:
 *  - bash: handler `file.function` (file relative to the working directory, `file` or `file.sh`);
 *    each call runs `source file; function "<payload>"` and its stdout is the output;
 *  - python: handler `pkg.module.function`; a warm worker process (function-worker.py) imports the
 *    module once at registration and answers one line per call, so no call pays an import.
 * Output that parses as JSON is returned as that value, otherwise as a string.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { isAbsolute, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Language } from './command.ts';

export const FUNCTION_WORKER = fileURLToPath(new URL('./function-worker.py', import.meta.url));
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

function killGroup(child: ChildProcess | undefined): void {
  try {
    if (child?.pid) process.kill(-child.pid, 'SIGKILL');
  } catch {
    /* gone */
  }
}

const BASH_CHECK = 'source "$1" >/dev/null 2>&1 || exit 3; declare -F "$2" >/dev/null || exit 4';
const BASH_CALL = 'source "$1" >&2 || exit 3; "$2" "$3"';

interface Handler {
  register(): Promise<void>;
  invoke(payload: string): Promise<InvokeResult>;
  cancel(): void;
}

/** Runs a short process; resolves with its exit code, stdout and the tail of stderr. */
function run(
  argv: string[],
  spec: FunctionSpec,
  baseEnv: NodeJS.ProcessEnv,
  onStart: (c: ChildProcess) => void = () => undefined,
): Promise<{ code: number; stdout: string; stderr: string; tooLarge: boolean }> {
  return new Promise((resolve) => {
    const child = spawn(argv[0] ?? 'false', argv.slice(1), {
      cwd: spec.workingDir,
      env: { ...spec.env, ...baseEnv },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    onStart(child);
    const out: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    let stderr = '';
    child.stdout?.on('data', (c: Buffer) => {
      size += c.length;
      if (size > FUNCTION_IO_LIMIT) {
        tooLarge = true;
        killGroup(child);
      } else out.push(c);
    });
    child.stderr?.on('data', (c: Buffer) => {
      stderr = (stderr + c.toString('utf8')).slice(-4096);
    });
    child.on('error', (err) => {
      stderr += err.message;
    });
    child.on('close', (code, signal) =>
      resolve({
        code: code ?? (signal ? 137 : 1),
        stdout: Buffer.concat(out).toString('utf8'),
        stderr,
        tooLarge,
      }),
    );
  });
}

class BashHandler implements Handler {
  private script = '';
  private fn = '';
  private inflight?: ChildProcess;
  private cancelled = false;
  constructor(
    private readonly spec: FunctionSpec,
    private readonly baseEnv: NodeJS.ProcessEnv,
  ) {}

  async register(): Promise<void> {
    const { module, fn } = splitHandler(this.spec.handler);
    this.script = bashScript(this.spec.workingDir, module);
    this.fn = fn;
    const r = await run(['bash', '-c', BASH_CHECK, 'check', this.script, fn], this.spec, this.baseEnv);
    if (r.code === 3) throw new RegistrationError(`sourcing ${module} failed`);
    if (r.code !== 0) throw new RegistrationError(`${module} defines no bash function ${JSON.stringify(fn)}`);
  }

  async invoke(payload: string): Promise<InvokeResult> {
    this.cancelled = false;
    const r = await run(
      ['bash', '-c', BASH_CALL, 'call', this.script, this.fn, payload],
      this.spec,
      this.baseEnv,
      (c) => {
        this.inflight = c;
      },
    );
    this.inflight = undefined;
    if (this.cancelled) return { ok: false, reason: 'Cancelled', error: 'the call was cancelled' };
    if (r.tooLarge) return { ok: false, reason: 'OutputTooLarge', error: `output exceeds ${FUNCTION_IO_LIMIT} bytes` };
    if (r.code !== 0)
      return { ok: false, reason: 'FunctionError', error: `exit status ${r.code}: ${r.stderr.trim().slice(-1024)}` };
    return { ok: true, output: outputValue(r.stdout) };
  }

  cancel(): void {
    this.cancelled = true;
    killGroup(this.inflight);
  }
}

type Pending = (line: string | undefined) => void;

class PythonHandler implements Handler {
  private worker?: ChildProcess;
  private buf = '';
  private waiting?: Pending;
  private stderr = '';
  constructor(
    private readonly spec: FunctionSpec,
    private readonly baseEnv: NodeJS.ProcessEnv,
  ) {}

  async register(): Promise<void> {
    splitHandler(this.spec.handler);
    const w = spawn('python3', ['-u', FUNCTION_WORKER, this.spec.handler], {
      cwd: this.spec.workingDir,
      env: { ...this.spec.env, ...this.baseEnv, PYTHONDONTWRITEBYTECODE: '1' },
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.worker = w;
    w.stdout?.on('data', (c: Buffer) => this.data(c));
    w.stderr?.on('data', (c: Buffer) => {
      this.stderr = (this.stderr + c.toString('utf8')).slice(-4096);
    });
    w.on('close', () => this.resolveLine(undefined));
    w.stdin?.on('error', () => undefined);
    const timer = setTimeout(() => killGroup(w), REGISTER_TIMEOUT_MS);
    const line = await this.next();
    clearTimeout(timer);
    const msg = line ? (JSON.parse(line) as { ready?: boolean; error?: string }) : undefined;
    if (!msg?.ready) {
      killGroup(w);
      throw new RegistrationError(msg?.error ?? `python worker exited: ${this.stderr.trim().slice(-1024)}`);
    }
  }

  private data(c: Buffer): void {
    this.buf += c.toString('utf8');
    if (this.buf.length > 2 * FUNCTION_IO_LIMIT + 4096) {
      this.buf = '';
      killGroup(this.worker);
      return;
    }
    let nl: number;
    while ((nl = this.buf.indexOf('\n')) >= 0) {
      const line = this.buf.slice(0, nl);
      this.buf = this.buf.slice(nl + 1);
      this.resolveLine(line);
    }
  }

  private resolveLine(line: string | undefined): void {
    const w = this.waiting;
    this.waiting = undefined;
    w?.(line);
  }

  private next(): Promise<string | undefined> {
    return new Promise((resolve) => {
      this.waiting = resolve;
    });
  }

  async invoke(payload: string): Promise<InvokeResult> {
    const w = this.worker;
    if (!w || w.exitCode !== null || w.signalCode !== null)
      return { ok: false, reason: 'NotRegistered', error: 'the python worker has exited' };
    let line0: string;
    try {
      line0 = JSON.stringify({ payload: JSON.parse(payload) as unknown });
    } catch {
      return { ok: false, reason: 'FunctionError', error: 'the payload is not JSON' };
    }
    const answer = this.next();
    w.stdin?.write(`${line0}\n`);
    const line = await answer;
    if (line === undefined) return { ok: false, reason: 'Cancelled', error: 'the python worker ended during the call' };
    const msg = JSON.parse(line) as { ok: boolean; output?: unknown; error?: string };
    if (!msg.ok) return { ok: false, reason: 'FunctionError', error: msg.error ?? 'error' };
    if (line.length > FUNCTION_IO_LIMIT + 32)
      return { ok: false, reason: 'OutputTooLarge', error: `output exceeds ${FUNCTION_IO_LIMIT} bytes` };
    return { ok: true, output: msg.output };
  }

  cancel(): void {
    killGroup(this.worker);
  }
}

/** One registered function: its handler and whether a call is in flight. */
export class RegisteredFunction {
  busy = false;
  constructor(
    readonly spec: FunctionSpec,
    private readonly handler: Handler,
  ) {}

  async invoke(payload: string): Promise<InvokeResult> {
    if (this.busy) return { ok: false, reason: 'Busy', error: 'a call is already in flight' };
    this.busy = true;
    try {
      return await this.handler.invoke(payload);
    } finally {
      this.busy = false;
    }
  }

  /** Kills the in-flight call (and, for python, the worker: the function is unusable afterwards). */
  close(): void {
    this.handler.cancel();
  }
}

export class Functions {
  private readonly all = new Map<string, RegisteredFunction>();
  constructor(
    private readonly lang: Language,
    private readonly baseEnv: NodeJS.ProcessEnv,
  ) {}

  get(id: string): RegisteredFunction | undefined {
    return this.all.get(id);
  }

  /** Registers (idempotent per id); a RegistrationError says why the handler cannot be used. */
  async register(spec: FunctionSpec): Promise<{ created: boolean }> {
    if (this.all.has(spec.id)) return { created: false };
    const h = this.lang === 'python' ? new PythonHandler(spec, this.baseEnv) : new BashHandler(spec, this.baseEnv);
    await h.register();
    if (this.all.has(spec.id)) {
      h.cancel();
      return { created: false };
    }
    this.all.set(spec.id, new RegisteredFunction(spec, h));
    return { created: true };
  }

  unregister(id: string): boolean {
    const f = this.all.get(id);
    if (!f) return false;
    f.close();
    this.all.delete(id);
    return true;
  }

  /** The execution lease lapsed: every function goes (fencing). */
  fence(): string[] {
    const ids = [...this.all.keys()];
    for (const id of ids) this.unregister(id);
    return ids;
  }
}
