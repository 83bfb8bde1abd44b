/**
 * The warm bash worker of a bash function (issue 15). One long-lived `bash` per registered
 * function sources the handler file once, at registration, and then runs each call **in itself**
 * as a plain function call, `function "<payload>"`: no fork, no exec, no re-source per call (a
 * fork per call cost more than everything else on the call path, ADR 0028). Protocol with the
 * Runtime Server:
 *   stdin   first line: a random token (for the ready line); then one line per call, a new random
 *           token of that call (read on fd 5; the call itself gets /dev/null)
 *   <dir>/in   the call's payload, written before its stdin line (bash reads pipes one byte at a
 *           time, a file in one read)
 *   stdout  the call's output, then `\n<call token> <exit status>\n` (`\n<token> ready\n` once
 *           sourced); written on fd 7, a copy of stdout the call cannot redirect away
 *   <dir>/err  the call's stderr (its tail goes into the error of a failed call)
 * What one call cannot leave to the next (tests in bash-worker.test.ts):
 *  - output: every process the call left in the worker's process group is signalled (SIGUSR2,
 *    which the worker traps and its children do not) before the end line is written, and the
 *    Runtime Server drops whatever arrives outside a call;
 *  - `exit`, a failure under `set -e`, `exec`: the worker ends; its exit status ends the call
 *    (with the output written so far) and a new worker is started (sourcing again);
 *  - shell options (`set`, `shopt`) and the working directory are put back as they were after
 *    sourcing; stdin is /dev/null; redirections of stdout/stderr end with the call;
 *  - a cancelled call, or one whose output passes the limit, is killed with the worker's process
 *    group; the worker is started again.
 * Shared between calls, like a python module's globals: variables, functions, other traps,
 * exported variables a call sets; files; processes that leave the process group (setsid, set -m).
 * Names starting with `__krt_` are the worker's own.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { constants, tmpdir } from 'node:os';
import { join } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import {
  FUNCTION_IO_LIMIT,
  REGISTER_TIMEOUT_MS,
  RegistrationError,
  bashScript,
  killGroup,
  outputValue,
  splitHandler,
  type FunctionSpec,
  type Handler,
  type InvokeResult,
} from './function-base.ts';

/** bash -c BASH_WORKER name <file> <function> <dir>; exit 3: sourcing failed, 4: no such function. */
export const BASH_WORKER = `
__krt_src=$1 __krt_fn=$2 __krt_dir=$3
set --
source "$__krt_src" >&2 </dev/null || exit 3
builtin declare -F "$__krt_fn" >/dev/null || exit 4
set +m
__krt_wd=$PWD __krt_so=$SHELLOPTS __krt_bo=$BASHOPTS
__krt_opts=$(set +o; shopt -p)
IFS= builtin read -r __krt_tok
exec 5<&0 </dev/null 7>&1
builtin printf '\\n%s ready\\n' "$__krt_tok"
while IFS= builtin read -r __krt_tok <&5; do
  IFS= builtin read -r -d '' __krt_p <"$__krt_dir/in" || :
  "$__krt_fn" "$__krt_p" </dev/null >&7 2>"$__krt_dir/err" 5<&-
  __krt_s=$?
  builtin trap : USR2
  builtin kill -USR2 0
  [[ $PWD == "$__krt_wd" ]] || builtin cd "$__krt_wd" || :
  [[ $SHELLOPTS == "$__krt_so" && $BASHOPTS == "$__krt_bo" ]] || builtin eval "$__krt_opts"
  builtin printf '\\n%s %d\\n' "$__krt_tok" "$__krt_s" >&7
done
`;

export interface CallEnd {
  output: string;
  status: string;
  tooLarge: boolean;
}

/** Pure: reads a worker's stdout up to the end marker of a call; keeps at most `limit` bytes of output. */
export class CallOutput {
  private text = '';
  private bytes = 0;
  private tooLarge = false;
  private readonly decoder = new StringDecoder('utf8');
  constructor(
    private marker: string,
    private readonly limit = FUNCTION_IO_LIMIT,
  ) {}

  /** A new call with its own end marker: whatever arrived before it (outside any call) is dropped. */
  reset(marker: string): void {
    this.marker = marker;
    this.text = '';
    this.bytes = 0;
    this.tooLarge = false;
  }

  /** The call's end once its marker line is complete; 'overflow' the first time output passes the limit. */
  push(chunk: Buffer): CallEnd | 'overflow' | undefined {
    this.bytes += chunk.length;
    this.text += this.decoder.write(chunk);
    const i = this.text.indexOf(this.marker);
    const nl = i >= 0 ? this.text.indexOf('\n', i + this.marker.length) : -1;
    if (nl >= 0) {
      const output = this.text.slice(0, i);
      const end = {
        output: this.tooLarge ? '' : output,
        status: this.text.slice(i + this.marker.length, nl),
        tooLarge: this.tooLarge || Buffer.byteLength(output) > this.limit,
      };
      this.text = this.text.slice(nl + 1);
      this.bytes = Buffer.byteLength(this.text);
      this.tooLarge = false;
      return end;
    }
    if (this.bytes <= this.limit + this.marker.length + 16) return undefined;
    // Past the limit: keep only enough to find the marker.
    this.text = this.text.slice(-(this.marker.length + 16));
    this.bytes = Buffer.byteLength(this.text);
    if (this.tooLarge) return undefined;
    this.tooLarge = true;
    return 'overflow';
  }

  /** What arrived since the last marker (the output of a call whose worker ended without one). */
  rest(): CallEnd {
    const end = { output: this.tooLarge ? '' : this.text, status: '', tooLarge: this.tooLarge };
    this.reset(this.marker);
    return end;
  }
}

/** The last `max` bytes of a file, or '' when it cannot be read. */
export async function tail(path: string, max = 4096): Promise<string> {
  try {
    const f = await open(path, 'r');
    try {
      const size = (await f.stat()).size;
      const buf = Buffer.alloc(Math.min(size, max));
      await f.read(buf, 0, buf.length, size - buf.length);
      return buf.toString('utf8');
    } finally {
      await f.close();
    }
  } catch {
    return '';
  }
}

/** How long a worker that exited may keep its stdout open (a process that left its group) before its call ends anyway. */
const EXIT_GRACE_MS = 200;

/** The exit status text of a worker that ended: its code, or 128 + the signal's number. */
function exitStatus(code: number | null, signal: NodeJS.Signals | null): string {
  if (code !== null) return String(code);
  const n = signal ? constants.signals[signal] : undefined;
  return n ? String(128 + n) : '';
}

export class BashWorker implements Handler {
  private script = '';
  private fn = '';
  private dir = '';
  private worker?: ChildProcess;
  private out = new CallOutput('');
  private starting?: Promise<void>;
  private dying?: ChildProcess;
  private waiting?: (end: CallEnd | undefined) => void;
  private inCall = false;
  private cancelled = false;
  private overflow = false;
  private closed = false;
  private stderr = '';
  constructor(
    private readonly spec: FunctionSpec,
    private readonly baseEnv: NodeJS.ProcessEnv,
  ) {}

  async register(): Promise<void> {
    const { module, fn } = splitHandler(this.spec.handler);
    this.script = bashScript(this.spec.workingDir, module);
    this.fn = fn;
    this.dir = mkdtempSync(join(tmpdir(), 'krt-fn-'));
    try {
      await this.start();
    } catch (err) {
      rmSync(this.dir, { recursive: true, force: true });
      throw err;
    }
  }

  /** Starts the worker and waits until it has sourced the file and found the function. */
  private async start(): Promise<void> {
    const token = randomBytes(16).toString('hex');
    this.out = new CallOutput(`\n${token} `);
    this.stderr = '';
    // --norc: bash -c with a socket as stdin (Node's pipes are socket pairs) and no SHLVL would
    // otherwise source ~/.bashrc, as for a command run by sshd.
    const w = spawn('bash', ['--norc', '-c', BASH_WORKER, 'krt-function', this.script, this.fn, this.dir], {
      cwd: this.spec.workingDir,
      env: { ...this.spec.env, ...this.baseEnv },
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.worker = w;
    this.watch(w);
    w.stdin?.write(`${token}\n`);
    const timer = setTimeout(() => killGroup(w), REGISTER_TIMEOUT_MS);
    const ready = await this.next();
    clearTimeout(timer);
    if (ready?.status === 'ready') return;
    killGroup(w);
    if (w.exitCode === null) await new Promise((r) => w.once('exit', r));
    const { module } = splitHandler(this.spec.handler);
    if (w.exitCode === 4) throw new RegistrationError(`${module} defines no bash function ${JSON.stringify(this.fn)}`);
    throw new RegistrationError(`sourcing ${module} failed: ${this.stderr.trim().slice(-1024)}`);
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
    writeFileSync(join(this.dir, 'in'), payload);
    const token = randomBytes(12).toString('hex');
    this.out.reset(`\n${token} `);
    const done = this.next();
    this.inCall = true;
    this.worker?.stdin?.write(`${token}\n`);
    const r = await this.result(await done);
    // A worker that ended with its call (exit, set -e, cancel) is replaced before the next call.
    if (!this.closed && !this.alive()) this.ready().catch(() => undefined);
    return r;
  }

  private async result(end: CallEnd | undefined): Promise<InvokeResult> {
    if (this.cancelled) return { ok: false, reason: 'Cancelled', error: 'the call was cancelled' };
    if (end?.tooLarge || this.overflow)
      return { ok: false, reason: 'OutputTooLarge', error: `output exceeds ${FUNCTION_IO_LIMIT} bytes` };
    if (!end || end.status === '')
      return { ok: false, reason: 'FunctionError', error: 'the bash worker ended during the call' };
    if (end.status !== '0') {
      const stderr = (await tail(join(this.dir, 'err'))).trim().slice(-1024);
      return { ok: false, reason: 'FunctionError', error: `exit status ${end.status}: ${stderr}` };
    }
    return { ok: true, output: outputValue(end.output) };
  }

  /** Kills the in-flight call with its worker; a new worker takes the next call. */
  cancel(): void {
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
    this.kill();
    this.worker?.stdin?.end();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
