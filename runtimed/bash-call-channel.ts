/**
 * runtimed's end of a bash function's call channel when a warm bash worker holds it (ADR 0029;
 * the Runtime Server's side is runtime-server/bash-channel.ts). Each call is a 40-byte header and
 * the payload out (runtime-server/bash-calls.ts), and the call's raw output back, ended by
 * `\n<call token> <status>\n` from the worker or `\n<secret> exit <status>|killed\n` from the
 * Runtime Server when the worker ended. Everything here comes from a process that runs the
 * function's code, so it is bounded and parsed as untrusted:
 *  - output past 1 MiB: the Runtime Server is asked to kill the worker, the call is OutputTooLarge;
 *  - output that arrives outside a call is dropped (the next call's own token ends it);
 *  - a failed call's stderr tail is read from the Runtime Server (only it can read the file);
 *  - once the worker ended, the channel closes: the next call opens a new one (a new worker).
 */
import type { Duplex } from 'node:stream';
import {
  CallOutput,
  callFrame,
  callResult,
  callResultNow,
  callToken,
  type CallEnd,
} from './runtime-server/bash-calls.ts';
import type { InvokeResult } from './runtime-server/functions.ts';

/** What the channel asks of the Runtime Server. */
export interface BashChannelHooks {
  /** The tail of the last call's stderr. */
  stderr(): Promise<string>;
  /** Kill the worker (the call's output passed the limit). */
  kill(): Promise<void>;
}

/** Pure: the end of a call from the Runtime Server's end-of-worker line (`exit <status>` or `killed`). */
export function workerEnd(end: CallEnd): { end: CallEnd; killed: boolean } {
  if (end.status === 'killed') return { end: { ...end, status: '' }, killed: true };
  const m = /^exit (\d*)$/.exec(end.status);
  return { end: { ...end, status: m?.[1] ?? '' }, killed: false };
}

export class BashCallChannel {
  readonly servedBy = 'bash-worker';
  /** The call in flight, until its result is delivered (a failed call's stderr is read first). */
  private waiter?: (r: InvokeResult) => void;
  private settling = false;
  private readonly out: CallOutput;
  private overflow = false;
  constructor(
    private readonly socket: Duplex,
    head: Buffer,
    secret: string,
    private readonly hooks: BashChannelHooks,
  ) {
    this.out = new CallOutput(`\n${callToken()} `, undefined, `\n${secret} `);
    socket.on('data', (c: Buffer) => this.data(c));
    socket.on('error', () => undefined);
    socket.on('close', () => this.settle(undefined, false));
    if (head.length) this.data(head);
  }

  get open(): boolean {
    return !this.socket.destroyed;
  }

  /** One call; Busy when one is in flight. Resolves Cancelled when the channel closes first. */
  call(payload: string): Promise<InvokeResult> {
    if (this.waiter) return Promise.resolve({ ok: false, reason: 'Busy', error: 'a call is already in flight' });
    if (!this.open)
      return Promise.resolve({ ok: false, reason: 'Cancelled', error: 'the bash-worker ended during the call' });
    const token = callToken();
    this.out.reset(`\n${token} `);
    this.overflow = false;
    return new Promise((resolve) => {
      this.waiter = resolve;
      this.socket.write(callFrame(token, payload));
    });
  }

  close(): void {
    this.socket.destroy();
  }

  private data(c: Buffer): void {
    const r = this.out.push(c);
    if (!r) return;
    if (r !== 'overflow' && r.by === 1) {
      const { end, killed } = workerEnd(r);
      this.settle(end, killed);
      this.socket.destroy();
      return;
    }
    if (!this.waiter) return;
    if (r === 'overflow') {
      this.overflow = true;
      // The worker goes; the Runtime Server's end line then ends the call (or the channel closes).
      this.hooks.kill().catch(() => this.socket.destroy());
      return;
    }
    // After an overflow the call ends only with its worker: a call sent before the kill landed
    // would be killed with it.
    if (!this.overflow) this.settle(r, false);
  }

  private settle(end: CallEnd | undefined, killed: boolean): void {
    const w = this.waiter;
    if (!w || this.settling) return;
    this.settling = true;
    const deliver = (r: InvokeResult): void => {
      this.settling = false;
      this.waiter = undefined;
      w(r);
    };
    if (!end && !killed && !this.overflow) {
      deliver({ ok: false, reason: 'Cancelled', error: 'the bash-worker ended during the call' });
      return;
    }
    const flags = { cancelled: killed && !this.overflow, overflow: this.overflow };
    // A call that did not fail is answered at once (no promise); a failed one reads its stderr first.
    const now = callResultNow(end, flags);
    if (now) return deliver(now);
    callResult(end, flags, () => this.hooks.stderr()).then(deliver, () =>
      deliver({ ok: false, reason: 'FunctionError', error: 'the call failed and its stderr could not be read' }),
    );
  }
}
