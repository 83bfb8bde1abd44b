/**
 * Function handlers of the Runtime Server (function-mode Runs, issue 15). A function is
 * registered once and then invoked many times, one call at a time:
 *  - bash: handler `file.function` (file relative to the working directory, `file` or `file.sh`);
 *    a warm bash worker (bash-worker.ts) sources the file once at registration and runs each call
 *    in a fresh subshell of it, `function "<payload>"`, whose stdout is the output;
 *  - python: handler `pkg.module.function`; a warm worker process (function-worker.py) imports the
 *    module once at registration and answers one line per call, so no call pays an import.
 * Output that parses as JSON is returned as that value, otherwise as a string.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { BashWorker } from './bash-worker.ts';
import type { Language } from './command.ts';
import {
  FUNCTION_IO_LIMIT,
  REGISTER_TIMEOUT_MS,
  RegistrationError,
  killGroup,
  splitHandler,
  type FunctionSpec,
  type Handler,
  type InvokeResult,
} from './function-base.ts';

export const FUNCTION_WORKER = fileURLToPath(new URL('./function-worker.py', import.meta.url));
export {
  FUNCTION_IO_LIMIT,
  REGISTER_TIMEOUT_MS,
  RegistrationError,
  bashScript,
  outputValue,
  splitHandler,
  type FunctionSpec,
  type InvokeResult,
} from './function-base.ts';

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

  /** Kills the worker with the call: a python call cannot be stopped alone (the function is unusable afterwards). */
  cancel(): void {
    killGroup(this.worker);
  }

  close(): void {
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

  /** Kills the in-flight call (for python, with its worker: the function is unusable afterwards). */
  cancel(): void {
    this.handler.cancel();
  }

  /** Unregistered: the in-flight call and the worker end. */
  close(): void {
    this.handler.close();
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
    const h = this.lang === 'python' ? new PythonHandler(spec, this.baseEnv) : new BashWorker(spec, this.baseEnv);
    await h.register();
    if (this.all.has(spec.id)) {
      h.close();
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
