/**
 * The subshell bash worker of a bash function (issue 15), kept as an option
 * (`KRT_BASH_CALL_ISOLATION=subshell`, ADR 0028): stronger isolation than the default warm worker
 * (bash-worker.ts), at the price of a fork per call. One long-lived `bash` per registered
 * function sources the handler file once, at registration; each call then runs the function in a
 * fresh subshell of it (a fork, no exec, no re-source) with the payload as one argument, and the
 * subshell's stdout is the output. Protocol with the Runtime Server:
 *   stdin   first line: a random token (never visible to the handler); then one line per call,
 *           its sequence number
 *   <dir>/in   the call's payload, written before its stdin line (read by bash from a file:
 *           bash reads pipes one byte at a time)
 *   stdout  the call's output, then `\n<token> <seq> <exit status>\n` (`\n<token> ready\n` once
 *           sourced); an end line with another seq (a subshell that died idle) is ignored
 *   fd 3    the pid (= process group) of each call's subshell, for cancelling it
 *   <dir>/err  the call's stderr (its tail goes into the error of a failed call)
 * The subshell of the next call is forked as soon as the previous one ends and waits for its
 * stdin line, so no call waits for a fork.
 * Isolation between calls: each call starts from the state right after sourcing (variables,
 * functions, shell options, traps, working directory and environment changes of a call end with
 * its subshell), stdin is /dev/null, and every process left in the call's process group is killed
 * when the call ends, so nothing it started writes into a later call's output. Not isolated: files
 * (the workspace, /tmp), and processes that leave the call's process group (setsid, a daemon).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { CallOutput, tail, type CallEnd } from './bash-calls.ts';
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
export const BASH_SUBSHELL_WORKER = `
__krt_src=$1 __krt_fn=$2 __krt_dir=$3
set --
source "$__krt_src" >&2 </dev/null 3>&- || exit 3
__krt_opts=$(set +o)
set +e +u +o pipefail -m
builtin declare -F "$__krt_fn" >/dev/null || exit 4
IFS= builtin read -r __krt_tok
__krt_me=$BASHPID
exec 5<&0 </dev/null
builtin printf '\\n%s ready\\n' "$__krt_tok"
while :; do
  (
    builtin unset __krt_tok
    exec 3>&-
    IFS= builtin read -r __krt_seq <&5 || { builtin kill -KILL "$__krt_me"; builtin exit 0; }
    exec 5<&- 2>"$__krt_dir/err"
    builtin printf '%s' "$__krt_seq" >"$__krt_dir/seq"
    IFS= builtin read -r -d '' __krt_p <"$__krt_dir/in"
    builtin unset __krt_seq
    builtin eval "$__krt_opts"
    "$__krt_fn" "$__krt_p"
  ) &
  __krt_pid=$!
  builtin printf '%d\\n' "$__krt_pid" >&3
  builtin wait "$__krt_pid"
  __krt_s=$?
  builtin kill -KILL -- "-$__krt_pid" 2>/dev/null
  IFS= builtin read -r __krt_seq <"$__krt_dir/seq"
  builtin printf '\\n%s %s %d\\n' "$__krt_tok" "$__krt_seq" "$__krt_s"
done
`;

export class BashSubshellWorker implements Handler {
  private script = '';
  private fn = '';
  private dir = '';
  private worker?: ChildProcess;
  private waiting?: (end: CallEnd | undefined) => void;
  private callPid = 0;
  private seq = 0;
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
      await this.start(module);
    } catch (err) {
      rmSync(this.dir, { recursive: true, force: true });
      throw err;
    }
  }

  /** Starts the worker and waits until it has sourced the file and found the function. */
  private async start(module: string): Promise<void> {
    const token = randomBytes(16).toString('hex');
    const out = new CallOutput(`\n${token} `);
    // --norc: no ~/.bashrc, as in bash-worker.ts.
    const w = spawn('bash', ['--norc', '-c', BASH_SUBSHELL_WORKER, 'krt-function', this.script, this.fn, this.dir], {
      cwd: this.spec.workingDir,
      env: { ...this.spec.env, ...this.baseEnv },
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
    });
    this.worker = w;
    // Events of a worker that has since been replaced settle nothing.
    const mine = (): boolean => this.worker === w;
    w.stdout?.on('data', (c: Buffer) => {
      const r = out.push(c);
      if (mine()) this.onOutput(r);
    });
    w.stderr?.on('data', (c: Buffer) => {
      this.stderr = (this.stderr + c.toString('utf8')).slice(-4096);
    });
    (w.stdio[3] as Readable).on('data', (c: Buffer) => {
      if (mine()) this.onPid(c.toString('utf8'));
    });
    w.on('close', () => {
      if (mine()) this.settle(undefined);
    });
    w.stdin?.on('error', () => undefined);
    w.stdin?.write(`${token}\n`);
    const timer = setTimeout(() => killGroup(w), REGISTER_TIMEOUT_MS);
    const ready = await this.next();
    clearTimeout(timer);
    if (ready?.status === 'ready') return;
    killGroup(w);
    if (w.exitCode === null) await new Promise((r) => w.once('close', r));
    if (w.exitCode === 4) throw new RegistrationError(`${module} defines no bash function ${JSON.stringify(this.fn)}`);
    throw new RegistrationError(`sourcing ${module} failed: ${this.stderr.trim().slice(-1024)}`);
  }

  private onOutput(r: CallEnd | 'overflow' | undefined): void {
    if (r === 'overflow') {
      this.overflow = true;
      this.killCall();
      return;
    }
    if (!r) return;
    if (r.status === 'ready') return this.settle(r);
    // `<seq> <exit status>`: an end that is not the current call's (a subshell that died idle) is ignored.
    const [seq, code] = r.status.split(' ');
    if (!this.inCall || (seq !== String(this.seq) && !this.cancelled)) return;
    this.settle({ ...r, status: code ?? '' });
  }

  /** The pid of the subshell waiting for (or running) the next call; it is forked ahead of the call. */
  private onPid(text: string): void {
    for (const line of text.split('\n')) if (/^\d+$/.test(line)) this.callPid = Number(line);
    if (this.cancelled || this.overflow) this.killCall();
  }

  private killCall(): void {
    try {
      if (this.inCall && this.callPid > 0) process.kill(-this.callPid, 'SIGKILL');
    } catch {
      /* gone */
    }
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
    return !!w && w.exitCode === null && w.signalCode === null;
  }

  async invoke(payload: string): Promise<InvokeResult> {
    if (this.closed) return { ok: false, reason: 'NotRegistered', error: 'the function was unregistered' };
    if (!this.alive()) {
      try {
        await this.start(splitHandler(this.spec.handler).module);
      } catch (err) {
        return { ok: false, reason: 'NotRegistered', error: `the bash worker could not restart: ${String(err)}` };
      }
    }
    this.cancelled = false;
    this.overflow = false;
    this.seq += 1;
    writeFileSync(join(this.dir, 'in'), payload);
    const done = this.next();
    this.inCall = true;
    this.worker?.stdin?.write(`${this.seq}\n`);
    return this.result(await done);
  }

  private async result(end: CallEnd | undefined): Promise<InvokeResult> {
    if (this.cancelled) return { ok: false, reason: 'Cancelled', error: 'the call was cancelled' };
    if (!end) return { ok: false, reason: 'FunctionError', error: 'the bash worker ended during the call' };
    if (end.tooLarge)
      return { ok: false, reason: 'OutputTooLarge', error: `output exceeds ${FUNCTION_IO_LIMIT} bytes` };
    if (end.status !== '0') {
      const stderr = (await tail(join(this.dir, 'err'))).trim().slice(-1024);
      return { ok: false, reason: 'FunctionError', error: `exit status ${end.status}: ${stderr}` };
    }
    return { ok: true, output: outputValue(end.output) };
  }

  /** Kills the in-flight call; the worker stays for the next call. */
  cancel(): void {
    this.cancelled = true;
    this.killCall();
  }

  /** Unregistered: the call, the worker and its files go. */
  close(): void {
    this.closed = true;
    this.cancel();
    try {
      if (this.callPid > 0) process.kill(-this.callPid, 'SIGKILL');
    } catch {
      /* gone */
    }
    killGroup(this.worker);
    this.worker?.stdin?.end();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
