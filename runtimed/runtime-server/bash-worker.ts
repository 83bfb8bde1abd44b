/**
 * The warm bash worker of a bash function (issue 15). One long-lived `bash` per registered
 * function sources the handler file once, at registration, and then runs each call **in itself**
 * as a plain function call, `function "<payload>"`: no fork, no exec, no re-source per call (a
 * fork per call cost more than everything else on the call path, ADR 0028). Calls reach it on one
 * of two paths, with the same wire format (bash-calls.ts):
 *  - runtimed's call channel itself (default, ADR 0029): the Runtime Server starts a worker with
 *    the upgraded connection as its stdin and stdout (bash-channel.ts), so a call goes runtimed ->
 *    worker -> runtimed with no Runtime Server process on its path;
 *  - stdin/stdout pipes from the Runtime Server (this class: the HTTP invoke route, a channel the
 *    hand-off could not take, and every call with KRT_FUNCTION_CALL_HANDOFF=off).
 * The worker's fds:
 *   0/1     calls in (a 40-byte header, then the payload; read on fd 5, the call itself gets
 *           /dev/null from fd 56), the call's output (fd 1, put back from fd 7 after each call)
 *           and `\n<call token> <status>\n` out (one write, so runtimed wakes once for it)
 *   2       the call's stderr: fd 59, <dir>/err (its tail goes into the error of a failed call),
 *           emptied before the next call when a call wrote to it
 *   3       `ready` once sourced, then closed (a pipe to the Runtime Server on both paths)
 *   8       the lease file last read; it is read again only when the file was replaced
 *   <dir>/lease  the execution lease's deadline (epoch microseconds), rewritten by the Runtime
 *           Server after every renewal: a call after it answers `fenced` and does not run
 * Per call the worker costs about 0.1-0.2 ms of bash (docs/benchmarks.md): it reads the payload
 * under LC_ALL=C (bytes, not characters) only when the locale is not C, and checks the lease
 * file's identity (two stats) instead of reading it.
 * What one call cannot leave to the next (tests in bash-worker.test.ts, on both paths):
 *  - output: every process the call left in the worker's process group is signalled (SIGUSR2,
 *    which the worker traps and its children do not) before the end line is written, and
 *    whatever arrives outside a call is dropped;
 *  - `exit`, a failure under `set -e`, `exec`: the worker ends; its exit status ends the call
 *    (with the output written so far) and a new worker is started (sourcing again);
 *  - shell options (`set`, `shopt`) and the working directory are put back as they were after
 *    sourcing; stdin is /dev/null; redirections of stdin/stdout/stderr (`exec >file`) end with the
 *    call (one `exec` after the call puts fds 0-2 back: no per-call redirection, bash-process.ts);
 *  - a cancelled call, or one whose output passes the limit, is killed with the worker's process
 *    group; the worker is started again.
 * Shared between calls, like a python module's globals: variables, functions, other traps,
 * exported variables a call sets; files; processes that leave the process group (setsid, set -m).
 * Names starting with `__krt_` are the worker's own, and so are fds 5, 7, 8, 56 and 59 (a call
 * may use the others; bash's own `{var}>` redirections take fds from 10).
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { BashChannel } from './bash-channel.ts';
import { CallOutput, callFrame, callResult, callToken, tail, type CallEnd } from './bash-calls.ts';
import {
  exitStatus,
  sourcingError,
  spawnBashWorker,
  workerGone,
  workerReady,
  writeLeaseFile,
  type WorkerIo,
} from './bash-process.ts';
import {
  bashScript,
  killGroup,
  splitHandler,
  type FunctionSpec,
  type Handler,
  type HandlerOptions,
  type InvokeResult,
  type RegisterOptions,
} from './function-base.ts';

/** How long a worker that exited may keep its stdout open (a process that left its group) before its call ends anyway. */
const EXIT_GRACE_MS = 200;

export class BashWorker implements Handler {
  private script = '';
  private fn = '';
  private dir = '';
  private worker?: ChildProcess;
  private out = new CallOutput('\n-');
  private starting?: Promise<void>;
  private dying?: ChildProcess;
  private waiting?: (end: CallEnd | undefined) => void;
  private inCall = false;
  private cancelled = false;
  private overflow = false;
  private closed = false;
  private stderr = '';
  /** Whether a worker has sourced the file and found the function (registration's check passed). */
  private sourced = false;
  /** The worker that holds runtimed's call channel, if one does. */
  private channel?: BashChannel;
  constructor(
    private readonly spec: FunctionSpec,
    private readonly baseEnv: NodeJS.ProcessEnv,
    private readonly opts: Pick<HandlerOptions, 'handOff' | 'leaseRemainingMs'>,
  ) {}

  /**
   * Checks the handler and starts the worker on the Runtime Server's pipes, which sources the file.
   * When runtimed opens the call channel right after (`channelFollows`) and the channel goes to a
   * worker of its own, that worker sources the file instead, and the channel's answer carries the
   * registration's outcome (a 422 when sourcing fails): the file is sourced once, not twice.
   */
  async register(opts: RegisterOptions = {}): Promise<void> {
    const { module, fn } = splitHandler(this.spec.handler);
    this.script = bashScript(this.spec.workingDir, module);
    this.fn = fn;
    this.dir = mkdtempSync(join(tmpdir(), 'krt-fn-'));
    try {
      this.leaseRenewed();
      if (!(opts.channelFollows && this.opts.handOff)) await this.start();
    } catch (err) {
      rmSync(this.dir, { recursive: true, force: true });
      throw err;
    }
  }

  private spawn(io: WorkerIo): ChildProcess {
    return spawnBashWorker(this.spec, this.baseEnv, { script: this.script, fn: this.fn, dir: this.dir }, io);
  }

  /** Starts the worker and waits until it has sourced the file and found the function. */
  private async start(): Promise<void> {
    this.out = new CallOutput(`\n${callToken()} `);
    this.stderr = '';
    const w = this.spawn('pipe');
    this.worker = w;
    this.watch(w);
    if (await workerReady(w)) {
      this.sourced = true;
      return;
    }
    killGroup(w);
    throw sourcingError(this.spec.handler, await workerGone(w), this.stderr);
  }
  /** Events of a worker that has since been replaced settle nothing. */
  private watch(w: ChildProcess): void {
    const mine = (): boolean => this.worker === w;
    w.stdout?.on('data', (c: Buffer) => {
      if (mine()) this.onOutput(this.out.push(c));
    });
    w.stderr?.on('data', (c: Buffer) => {
      if (mine()) this.stderr = (this.stderr + c.toString('utf8')).slice(-4096);
    });
    w.stdin?.on('error', () => undefined);
    let ended = false;
    const end = (status: string): void => {
      if (ended || !mine()) return;
      ended = true;
      this.settle({ ...this.out.rest(), status });
    };
    w.on('exit', (code, signal) => {
      const status = exitStatus(code, signal);
      // What the call left in the group goes with the worker; its output is read to the end.
      killGroup(w);
      w.on('close', () => end(status));
      setTimeout(() => end(status), EXIT_GRACE_MS).unref();
    });
  }

  private onOutput(r: CallEnd | 'overflow' | undefined): void {
    if (r === 'overflow') {
      this.overflow = true;
      if (this.inCall) this.kill();
      return;
    }
    if (r) this.settle(r);
  }

  private settle(end: CallEnd | undefined): void {
    const w = this.waiting;
    this.waiting = undefined;
    this.inCall = false;
    w?.(end);
  }

  private next(): Promise<CallEnd | undefined> {
    return new Promise((resolve) => {
      this.waiting = resolve;
    });
  }

  private alive(): boolean {
    const w = this.worker;
    return !!w && w !== this.dying && w.exitCode === null && w.signalCode === null;
  }

  /** A live worker: the one running, or a new one (sourcing again) when the last one ended. */
  private async ready(): Promise<void> {
    if (!this.starting && !this.alive())
      this.starting = this.start().finally(() => {
        this.starting = undefined;
      });
    await this.starting;
  }

  async invoke(payload: string): Promise<InvokeResult> {
    if (this.closed) return { ok: false, reason: 'NotRegistered', error: 'the function was unregistered' };
    try {
      await this.ready();
    } catch (err) {
      return { ok: false, reason: 'NotRegistered', error: `the bash worker could not restart: ${String(err)}` };
    }
    this.cancelled = false;
    this.overflow = false;
    const token = callToken();
    this.out.reset(`\n${token} `);
    const done = this.next();
    this.inCall = true;
    this.worker?.stdin?.write(callFrame(token, payload));
    const end = await done;
    const flags = { cancelled: this.cancelled, overflow: this.overflow };
    const r = await callResult(end, flags, () => tail(join(this.dir, 'err')));
    // A worker that ended with its call (exit, set -e, cancel) is replaced before the next call.
    if (!this.closed && !this.alive()) this.ready().catch(() => undefined);
    return r;
  }

  /**
   * Kills the in-flight call with its worker; a new worker takes the next call. A worker that
   * holds runtimed's channel is killed whether or not it is in a call (this process does not see
   * its calls; runtimed asks only while one is in flight): the Runtime Server then tells runtimed.
   */
  cancel(): void {
    this.channel?.kill();
    if (!this.inCall) return;
    this.cancelled = true;
    this.kill();
  }

  /** Kills the worker with everything in its process group; the next call gets a new worker. */
  private kill(): void {
    this.dying = this.worker;
    killGroup(this.worker);
  }

  /** Unregistered: the call, the worker and its files go. */
  close(): void {
    this.closed = true;
    this.cancel();
    this.channel?.kill();
    this.kill();
    this.worker?.stdin?.end();
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** The tail of the last call's stderr (runtimed asks for it when a call on its channel failed). */
  lastStderr(): Promise<string> {
    return tail(join(this.dir, 'err'));
  }

  /** The lease was renewed: its deadline goes to the file every worker checks before a call. */
  leaseRenewed(): void {
    if (!this.dir || this.closed) return;
    try {
      writeLeaseFile(this.dir, this.opts.leaseRemainingMs());
    } catch {
      /* unregistered meanwhile: the directory is gone */
    }
  }

  /**
   * Hands runtimed's call channel to a new worker started with it as stdin and stdout
   * (bash-channel.ts): calls then go runtimed -> worker with no Runtime Server on their path. The
   * worker on the Runtime Server's pipes is stopped (started again only if a call comes that way).
   * `serve` is the Runtime Server's own service of the channel, used when the new worker fails.
   */
  handOff(socket: Duplex, head: Buffer, serve: () => void): boolean {
    if (!this.opts.handOff || this.closed || head.length || !(socket instanceof Socket)) return false;
    this.channel?.kill();
    if (!this.inCall && this.alive()) this.kill();
    const ch = new BashChannel(
      socket,
      (io) => this.spawn(io),
      () => {
        if (this.channel === ch) this.channel = undefined;
      },
    );
    this.channel = ch;
    void ch.start().then((state) => {
      if (state === 'ready') this.sourced = true;
      if (state !== 'failed' || this.closed) return;
      // The registration's own check (channelFollows) failed: runtimed learns why from the answer.
      if (!this.sourced) ch.refuse(sourcingError(this.spec.handler, ch.failure.code, ch.failure.stderr).message);
      else serve();
    });
    return true;
  }
}
