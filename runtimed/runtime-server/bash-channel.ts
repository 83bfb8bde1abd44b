/**
 * A bash function's call channel held by its warm worker itself (ADR 0029). bash cannot take a
 * socket passed over a Unix socket (SCM_RIGHTS), as the python worker does, so the Runtime Server
 * starts a worker with runtimed's upgraded connection as its stdin and stdout. Node stops reading
 * a socket it gives a child, so from then on only the worker reads runtimed's calls, and it writes
 * each call's output and end line (bash-calls.ts) straight back: no Runtime Server process on the
 * call path.
 *
 * The Runtime Server keeps its own copy of the connection, not reading it, for one thing: when
 * the worker ends (`exit`, `set -e`, `exec`, a cancel, the lease lapse, unregistering) it writes
 *   `\n<secret> exit <status>\n`   the worker ended by itself (its status ends the call), or
 *   `\n<secret> killed\n`          this process killed it (cancel, lapse, unregister)
 * and shuts the connection down, so runtimed ends the call even when a process that left the
 * worker's process group still holds the connection. The secret is new per channel, sent to
 * runtimed in the 101 (`Kruntimes-Worker-End`), which the worker never reads. runtimed then opens
 * a new channel, and so a new worker (sourcing the file again), as the pipe path restarts one.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import { refuseUpgrade } from '../../lib/http/upgrade-refusal.ts';
import { exitStatus, workerGone, workerReady, type WorkerIo } from './bash-process.ts';
import { killGroup } from './function-base.ts';

/** The 101's header with the Runtime Server's end-of-worker secret. */
export const WORKER_END_HEADER = 'Kruntimes-Worker-End';
/** Who answers a channel a bash worker holds (the 101's Kruntimes-Call-Server). */
export const BASH_CALL_SERVER = 'bash-worker';

export type ChannelState = 'ready' | 'failed' | 'killed';

export class BashChannel {
  readonly secret = randomBytes(16).toString('hex');
  /** A worker that did not start: its exit code and the tail of its stderr (what sourcing printed). */
  readonly failure: { code: number | null; stderr: string } = { code: null, stderr: '' };
  private worker?: ChildProcess;
  private killed = false;
  private started = false;
  constructor(
    private readonly socket: Socket,
    private readonly spawn: (io: WorkerIo) => ChildProcess,
    private readonly onEnd: () => void,
  ) {
    socket.on('error', () => undefined);
  }

  /**
   * Starts the worker with the connection; once it has sourced the file, writes the 101
   * (runtimed sends no call before it). 'failed': the worker did not start, and the connection is
   * left to the Runtime Server to serve; 'killed': killed meanwhile, the connection is closed.
   */
  async start(): Promise<ChannelState> {
    const w = this.spawn(this.socket);
    this.worker = w;
    w.stderr?.on('data', (c: Buffer) => {
      this.failure.stderr = (this.failure.stderr + c.toString('utf8')).slice(-4096);
    });
    w.on('exit', (code, signal) => this.ended(w, exitStatus(code, signal)));
    w.on('error', () => undefined);
    const ready = await workerReady(w);
    if (this.killed) {
      this.socket.destroy();
      return 'killed';
    }
    if (!ready) {
      killGroup(w);
      this.failure.code = await workerGone(w);
      this.onEnd();
      return 'failed';
    }
    this.started = true;
    this.socket.write(
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: kruntimes-function-calls\r\nConnection: Upgrade\r\n' +
        `Kruntimes-Call-Server: ${BASH_CALL_SERVER}\r\n${WORKER_END_HEADER}: ${this.secret}\r\n\r\n`,
    );
    return 'ready';
  }

  /**
   * Answers a channel whose worker failed with 422 and `message` instead of a 101: the function's
   * registration check happened here (the registration left it to this channel), and it failed.
   */
  refuse(message: string): void {
    refuseUpgrade(this.socket, 422, 'Invalid', message);
  }

  /** Kills the worker with its process group; runtimed learns it from the end line. */
  kill(): void {
    this.killed = true;
    killGroup(this.worker);
  }

  private ended(w: ChildProcess, status: string): void {
    // What the call left in the group goes with the worker, before the end line.
    killGroup(w);
    this.onEnd();
    if (!this.started) return;
    const line = this.killed ? `\n${this.secret} killed\n` : `\n${this.secret} exit ${status}\n`;
    this.socket.end(line, () => this.socket.destroy());
  }
}
