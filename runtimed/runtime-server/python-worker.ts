/**
 * The warm Python worker of a python function (function-worker.py): it imports the handler's
 * module once, at registration, and answers one line per call. Two call paths:
 *  - hand-off (default, issue 15): the Runtime Server passes each call channel runtimed upgrades
 *    for this function to the worker over a Node IPC channel (the socket itself, SCM_RIGHTS), and
 *    the worker answers runtimed on it directly, so no Runtime Server process is on the call path.
 *    The execution lease's deadline goes to the worker after every renewal, so it refuses a call
 *    after the lapse exactly as the Runtime Server does; the lapse itself still kills the worker.
 *  - through the Runtime Server: stdin/stdout, one line each way (the HTTP invoke route, and every
 *    call with KRT_FUNCTION_CALL_HANDOFF=off).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { fileURLToPath } from 'node:url';
import {
  FUNCTION_IO_LIMIT,
  REGISTER_TIMEOUT_MS,
  RegistrationError,
  killGroup,
  parseInvokeResult,
  splitHandler,
  type FunctionSpec,
  type Handler,
  type HandlerOptions,
  type InvokeResult,
} from './function-base.ts';

export const FUNCTION_WORKER = fileURLToPath(new URL('./function-worker.py', import.meta.url));

type Pending = (line: string | undefined) => void;
const ignore = (): void => undefined;

/** Pure: the payload as one line (JSON text with layout newlines re-serialised), or undefined when it is not JSON. */
export function payloadLine(payload: string): string | undefined {
  if (!payload.includes('\n') && !payload.includes('\r')) return payload;
  try {
    return JSON.stringify(JSON.parse(payload));
  } catch {
    return undefined;
  }
}

export class PythonHandler implements Handler {
  private worker?: ChildProcess;
  private buf = '';
  private waiting?: Pending;
  private stderr = '';
  private channels = 0;
  private killed = false;
  /** Connections handed to the worker and not yet known to be taken (closed here if it dies first). */
  private readonly handed = new Set<{ close(): void }>();
  constructor(
    private readonly spec: FunctionSpec,
    private readonly baseEnv: NodeJS.ProcessEnv,
    private readonly opts: HandlerOptions,
  ) {}

  async register(): Promise<void> {
    splitHandler(this.spec.handler);
    const w = spawn('python3', ['-u', FUNCTION_WORKER, this.spec.handler], {
      cwd: this.spec.workingDir,
      env: { ...this.spec.env, ...this.baseEnv, PYTHONDONTWRITEBYTECODE: '1' },
      detached: true,
      stdio: this.opts.handOff ? ['pipe', 'pipe', 'pipe', 'ipc'] : ['pipe', 'pipe', 'pipe'],
    });
    this.worker = w;
    w.stdout?.on('data', (c: Buffer) => this.data(c));
    w.stderr?.on('data', (c: Buffer) => {
      this.stderr = (this.stderr + c.toString('utf8')).slice(-4096);
    });
    w.on('close', () => this.resolveLine(undefined));
    // Node keeps a passed handle open until the receiver acknowledges it, and a worker that died
    // never will: close it, so runtimed sees the connection end instead of waiting for a 101.
    w.on('exit', () => {
      for (const h of this.handed) h.close();
      this.handed.clear();
    });
    w.on('error', ignore);
    w.stdin?.on('error', ignore);
    this.leaseRenewed();
    const timer = setTimeout(() => killGroup(w), REGISTER_TIMEOUT_MS);
    const line = await this.next();
    clearTimeout(timer);
    const msg = line ? (JSON.parse(line) as { ready?: boolean; error?: string }) : undefined;
    if (!msg?.ready) {
      killGroup(w);
      throw new RegistrationError(msg?.error ?? `python worker exited: ${this.stderr.trim().slice(-1024)}`);
    }
  }

  /** The worker, unless it exited or this handler killed it (its exit may not have been seen yet). */
  private alive(): ChildProcess | undefined {
    const w = this.worker;
    return w && !this.killed && w.exitCode === null && w.signalCode === null ? w : undefined;
  }

  private kill(): void {
    this.killed = true;
    killGroup(this.worker);
  }

  /** Sends the lease's deadline (CLOCK_MONOTONIC ns as a string, null when not armed) over the IPC channel. */
  leaseRenewed(): void {
    const w = this.alive();
    if (!w?.connected) return;
    const d = this.opts.leaseDeadline();
    w.send({ lease: d === undefined ? null : String(d) }, ignore);
  }

  /**
   * Passes an upgraded call channel to the worker. Node queues every message after a passed
   * handle until the worker acknowledges it and closes its own copy on that acknowledgement, so
   * `go` reaches the worker only once the Runtime Server no longer reads the connection; the
   * worker writes the 101 then, and runtimed sends no call before the 101.
   */
  handOff(socket: Duplex, head: Buffer): boolean {
    const w = this.alive();
    if (!this.opts.handOff || !w?.connected || !(socket instanceof Socket)) return false;
    const handle = (socket as unknown as { _handle?: { close(): void } })._handle;
    if (!handle) return false;
    const n = ++this.channels;
    // The connection leaves the Runtime Server's HTTP server for good (no per-socket bookkeeping).
    (socket as Socket & { server: unknown }).server = null;
    this.handed.add(handle);
    w.send({ calls: n, head: head.toString('hex') }, socket, ignore);
    // Written only after the acknowledgement: from then on the worker holds the only copy.
    w.send({ go: n }, () => this.handed.delete(handle));
    return true;
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

  /** One call through the Runtime Server (stdin/stdout). */
  async invoke(payload: string): Promise<InvokeResult> {
    const w = this.alive();
    if (!w) return { ok: false, reason: 'NotRegistered', error: 'the python worker has exited' };
    const line = payloadLine(payload);
    if (line === undefined) return { ok: false, reason: 'FunctionError', error: 'the payload is not JSON' };
    const answer = this.next();
    w.stdin?.write(`${line}\n`);
    const got = await answer;
    if (got === undefined) return { ok: false, reason: 'Cancelled', error: 'the python worker ended during the call' };
    return parseInvokeResult(got);
  }

  /** Kills the worker with the call: a python call cannot be stopped alone (the function is unusable afterwards). */
  cancel(): void {
    this.kill();
  }

  close(): void {
    this.kill();
  }
}
