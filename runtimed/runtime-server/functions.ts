/**
 * Function handlers of the Runtime Server (function-mode Runs, issue 15). A function is
 * registered once and then invoked many times, one call at a time:
 *  - bash: handler `file.function` (file relative to the working directory, `file` or `file.sh`);
 *    a warm bash worker (bash-worker.ts) sources the file once at registration and runs each call
 *    in itself, `function "<payload>"`, whose stdout is the output (KRT_BASH_CALL_ISOLATION=subshell:
 *    in a fresh subshell of it per call, bash-subshell-worker.ts); runtimed's call channel is the
 *    stdin and stdout of a worker started for it (bash-channel.ts), so no call crosses this process;
 *  - python: handler `pkg.module.function`; a warm worker process (python-worker.ts,
 *    function-worker.py) imports the module once at registration and answers one line per call, so
 *    no call pays an import; runtimed's call channel is handed to it, so no call crosses this process.
 * Output that parses as JSON is returned as that value, otherwise as a string.
 */
import type { Duplex } from 'node:stream';
import { BashSubshellWorker } from './bash-subshell-worker.ts';
import { BashWorker } from './bash-worker.ts';
import type { Language } from './command.ts';
import type { FunctionSpec, Handler, HandlerOptions, InvokeResult, RegisterOptions } from './function-base.ts';
import { PythonHandler } from './python-worker.ts';

export { FUNCTION_WORKER } from './python-worker.ts';
export {
  FUNCTION_IO_LIMIT,
  REGISTER_TIMEOUT_MS,
  RegistrationError,
  bashScript,
  outputValue,
  splitHandler,
  type FunctionSpec,
  type HandlerOptions,
  type InvokeResult,
  type RegisterOptions,
} from './function-base.ts';

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

  /**
   * Hands an upgraded call channel to the handler's worker; false when the Runtime Server serves
   * it. `serve` is that service, for a worker that turns out not to start (default: close it).
   */
  handOff(socket: Duplex, head: Buffer, serve: () => void = () => socket.destroy()): boolean {
    return this.handler.handOff?.(socket, head, serve) ?? false;
  }

  leaseRenewed(): void {
    this.handler.leaseRenewed?.();
  }

  /** The tail of the last call's stderr, for a handler that keeps it in a file ('' otherwise). */
  lastStderr(): Promise<string> {
    return this.handler.lastStderr?.() ?? Promise.resolve('');
  }
}

/** Whether the warm worker takes the call channel (KRT_FUNCTION_CALL_HANDOFF=off keeps the Runtime Server on the path). */
export function handOffEnabled(env: NodeJS.ProcessEnv): boolean {
  return env.KRT_FUNCTION_CALL_HANDOFF !== 'off';
}

/** Whether each bash call runs in a subshell of the warm worker (KRT_BASH_CALL_ISOLATION=subshell) instead of in it. */
export function bashSubshells(env: NodeJS.ProcessEnv): boolean {
  return env.KRT_BASH_CALL_ISOLATION === 'subshell';
}

export class Functions {
  private readonly all = new Map<string, RegisteredFunction>();
  private readonly opts: HandlerOptions;
  constructor(
    private readonly lang: Language,
    private readonly baseEnv: NodeJS.ProcessEnv,
    opts: Partial<HandlerOptions> = {},
  ) {
    this.opts = {
      handOff: handOffEnabled(baseEnv),
      bashSubshells: bashSubshells(baseEnv),
      leaseDeadline: () => undefined,
      leaseRemainingMs: () => undefined,
      ...opts,
    };
  }

  get(id: string): RegisteredFunction | undefined {
    return this.all.get(id);
  }

  /** Registers (idempotent per id); a RegistrationError says why the handler cannot be used. */
  async register(spec: FunctionSpec, opts: RegisterOptions = {}): Promise<{ created: boolean }> {
    if (this.all.has(spec.id)) return { created: false };
    const h =
      this.lang === 'python'
        ? new PythonHandler(spec, this.baseEnv, this.opts)
        : this.opts.bashSubshells
          ? new BashSubshellWorker(spec, this.baseEnv)
          : new BashWorker(spec, this.baseEnv, this.opts);
    await h.register(opts);
    if (this.all.has(spec.id)) {
      h.close();
      return { created: false };
    }
    const f = new RegisteredFunction(spec, h);
    this.all.set(spec.id, f);
    // Renewals during the registration went to the registered functions only.
    f.leaseRenewed();
    return { created: true };
  }

  unregister(id: string): boolean {
    const f = this.all.get(id);
    if (!f) return false;
    f.close();
    this.all.delete(id);
    return true;
  }

  /** The execution lease was renewed: handlers that serve calls themselves learn the new deadline. */
  leaseRenewed(): void {
    for (const f of this.all.values()) f.leaseRenewed();
  }

  /** The execution lease lapsed: every function goes (fencing). */
  fence(): string[] {
    const ids = [...this.all.keys()];
    for (const id of ids) this.unregister(id);
    return ids;
  }
}
