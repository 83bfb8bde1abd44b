/**
 * The process of a warm bash worker (bash-worker.ts explains the worker; bash-calls.ts its calls'
 * wire format): its script, how it is started, when it is ready, and the lease file it checks.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { renameSync, writeFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { constants } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { REGISTER_TIMEOUT_MS, RegistrationError, killGroup, splitHandler, type FunctionSpec } from './function-base.ts';

/**
 * bash -c BASH_WORKER name <file> <function> <dir>; exit 3: sourcing failed, 4: no such function.
 * The options and the working directory are put back right after the end line (before the next
 * call is read), so the answer does not wait for them.
 * The call runs with no redirection of its own: a redirection on a function call makes bash save
 * and restore each descriptor (about 40 system calls and a file open per call). Instead the
 * worker's own descriptors already are the call's (0 = /dev/null, 1 = the output, 2 = the err
 * file), and after the call one `exec` puts fd 1 back before the end line and another fds 0 and 2
 * after it (bash saves and closes a copy of each descriptor an `exec` replaces: seven system calls
 * each, so only fd 1's are between the call's output and its end line). Apart, too, because a
 * failed `exec` undoes all of its redirections: a call that closed fd 56 or 59 and sent its stdout
 * elsewhere had its end line written there (the call never ended). The err file is opened anew
 * (emptied) only before a call that follows one that wrote to it, or that closed fd 59 (fd 56, the
 * /dev/null the worker keeps, is opened again right away when a call closed it).
 * The group signal (`kill -USR2 0`) reaches the worker too: its own copy is ignored (`trap ''`), so
 * no trap runs between the call's output and its end line; the call's processes were started while
 * the trap was `:` (caught, so default in a child) and are ended by it. `trap : USR2` is put back
 * after the end line, before the next call starts any process (an ignored signal stays ignored in
 * children).
 */
export const BASH_WORKER = `
__krt_src=$1 __krt_fn=$2 __krt_dir=$3
set --
source "$__krt_src" >&2 </dev/null 3>&- || exit 3
builtin declare -F "$__krt_fn" >/dev/null || exit 4
set +m
__krt_wd=$PWD __krt_so=$SHELLOPTS __krt_bo=$BASHOPTS
__krt_opts=$(set +o; shopt -p)
command exec 5<&0 56</dev/null 0<&56 7>&1 8</dev/null
builtin printf 'ready\\n' >&3
command exec 3>&-
__krt_e=
while builtin read -r -N 40 -u 5 __krt_h; do
  __krt_tok=\${__krt_h%% *} __krt_n=$((10#\${__krt_h##* }))
  if [[ \${LC_ALL:-\${LC_CTYPE:-\${LANG:-C}}} == @(C|POSIX) ]]; then
    builtin read -r -N "$__krt_n" -u 5 __krt_p || break
  else
    LC_ALL=C builtin read -r -N "$__krt_n" -u 5 __krt_p || break
  fi
  [[ /dev/fd/8 -ef $__krt_dir/lease ]] || { command exec 8<"$__krt_dir/lease" && IFS= builtin read -r -u 8 __krt_d; }
  if ((__krt_d && \${EPOCHREALTIME//[!0-9]/} >= __krt_d)); then
    builtin printf '%s' $'\\n'"$__krt_tok fenced"$'\\n'
    continue
  fi
  [[ $__krt_e ]] || { command exec 59>"$__krt_dir/err" 2>&59 && __krt_e=1; }
  "$__krt_fn" "$__krt_p"
  __krt_s=$?
  command exec 1>&7
  builtin trap '' USR2
  builtin kill -USR2 0
  builtin printf '%s' $'\\n'"$__krt_tok $__krt_s"$'\\n'
  builtin trap : USR2
  command exec 0<&56 2>&59 || { __krt_e=; command exec 56</dev/null; command exec 0<&56; }
  [[ ! -s $__krt_dir/err && $PWD == "$__krt_wd" && $SHELLOPTS == "$__krt_so" && $BASHOPTS == "$__krt_bo" ]] || {
    [[ -s $__krt_dir/err ]] && __krt_e=
    [[ $PWD == "$__krt_wd" ]] || builtin cd "$__krt_wd" || :
    [[ $SHELLOPTS == "$__krt_so" && $BASHOPTS == "$__krt_bo" ]] || builtin eval "$__krt_opts"
  }
done
`;

/** Where a worker's calls come from and go: pipes to the Runtime Server, or runtimed's channel itself. */
export type WorkerIo = 'pipe' | Socket;

/** Starts a worker of `spec` (detached: its own process group); fd 3 is the pipe its ready line comes on. */
export function spawnBashWorker(
  spec: FunctionSpec,
  baseEnv: NodeJS.ProcessEnv,
  args: { script: string; fn: string; dir: string },
  io: WorkerIo,
): ChildProcess {
  // --norc: bash -c with a socket as stdin (Node's pipes are socket pairs, and so is a channel)
  // and no SHLVL would otherwise source ~/.bashrc, as for a command run by sshd.
  return spawn('bash', ['--norc', '-c', BASH_WORKER, 'krt-function', args.script, args.fn, args.dir], {
    cwd: spec.workingDir,
    env: { ...spec.env, ...baseEnv },
    detached: true,
    stdio: [io, io, 'pipe', 'pipe'],
  });
}

/** Resolves true once the worker wrote its ready line (fd 3), false when it ended or timed out first. */
export function workerReady(w: ChildProcess, timeoutMs = REGISTER_TIMEOUT_MS): Promise<boolean> {
  return new Promise((resolve) => {
    let text = '';
    const timer = setTimeout(() => {
      killGroup(w);
      resolve(false);
    }, timeoutMs);
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      resolve(ok);
    };
    const ctl = w.stdio[3] as Readable | null;
    ctl?.on('error', () => undefined);
    ctl?.on('data', (c: Buffer) => {
      text += c.toString('latin1');
      if (text.includes('ready\n')) done(true);
    });
    w.once('exit', () => done(text.includes('ready\n')));
    w.once('error', () => done(false));
  });
}

/** Pure: why a worker of `handler` did not get ready (exit 4: the file defines no such function; otherwise sourcing failed). */
export function sourcingError(handler: string, code: number | null, stderr: string): RegistrationError {
  const { module, fn } = splitHandler(handler);
  if (code === 4) return new RegistrationError(`${module} defines no bash function ${JSON.stringify(fn)}`);
  return new RegistrationError(`sourcing ${module} failed: ${stderr.trim().slice(-1024)}`);
}

/**
 * Waits until a worker that did not get ready (and was killed) has exited and its stderr is read,
 * at most `boundMs` (a process that left the group may hold the pipe). Resolves its exit code.
 */
export async function workerGone(w: ChildProcess, boundMs = 1000): Promise<number | null> {
  const closed = w.exitCode !== null || w.signalCode !== null ? (w.stderr?.readableEnded ?? true) : false;
  if (!closed)
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, boundMs);
      w.once('close', () => {
        clearTimeout(t);
        resolve();
      });
    });
  return w.exitCode;
}

/** Writes the lease deadline file atomically (epoch microseconds; empty when the lease is not armed). */
export function writeLeaseFile(
  dir: string,
  remainingMs: number | undefined,
  nowMs = performance.timeOrigin + performance.now(),
): void {
  const text = remainingMs === undefined ? '\n' : `${Math.floor((nowMs + remainingMs) * 1000)}\n`;
  const tmp = join(dir, 'lease.tmp');
  writeFileSync(tmp, text);
  renameSync(tmp, join(dir, 'lease'));
}

/** The exit status text of a worker that ended: its code, or 128 + the signal's number. */
export function exitStatus(code: number | null, signal: NodeJS.Signals | null): string {
  if (code !== null) return String(code);
  const n = signal ? constants.signals[signal] : undefined;
  return n ? String(128 + n) : '';
}
