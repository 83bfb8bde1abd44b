/**
 * runtimed's end of a function's call channel (runtime-server/function-calls.ts): one upgraded,
 * dialled-in connection per function, one line per call each way, opened on the first call and
 * reopened after it closes. A channel carries one call at a time (the gateway allows one in
 * flight per Run); a second concurrent call is answered Busy without touching the connection.
 * A python function's channel is answered by its warm worker itself (the Runtime Server handed
 * the connection over; its 101 says `Kruntimes-Call-Server: python-worker`). That process runs
 * the function's code, so every answer is parsed as untrusted (parseInvokeResult), and the
 * channel closing during a call means the worker ended: the call is Cancelled, as before.
 * A bash function's channel is held by its warm worker, with its own framing (bash-call-channel.ts).
 */
import http from 'node:http';
import type { Duplex } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { BashCallChannel, type BashChannelHooks } from './bash-call-channel.ts';
import type { Oncreate } from './dial-in.ts';
import { parseInvokeResult } from './runtime-server/function-base.ts';
import { CALL_LINE_LIMIT, CALLS_UPGRADE, lineSplitter } from './runtime-server/function-calls.ts';
import type { InvokeResult } from './runtime-server/functions.ts';

/** The 101 header naming who answers the calls of a channel (absent: the Runtime Server). */
export const CALL_SERVER_HEADER = 'kruntimes-call-server';
/** The 101 header with the Runtime Server's end-of-worker secret of a channel a bash worker holds. */
export const WORKER_END_HEADER = 'kruntimes-worker-end';

/** A function's call channel, whoever answers it. */
export type Channel = CallChannel | BashCallChannel;

type Waiter = { resolve: (r: InvokeResult) => void; reject: (e: Error) => void };

export class CallChannel {
  private waiter?: Waiter;
  private constructor(
    private readonly socket: Duplex,
    head: Buffer,
    /** Who answers the calls: 'runtime-server', or the worker that took the channel ('python-worker'). */
    readonly servedBy: string,
  ) {
    const feed = lineSplitter(
      CALL_LINE_LIMIT,
      (line) => this.answer(line),
      () => socket.destroy(new Error('the call channel sent an over-long answer')),
    );
    const text = new StringDecoder('utf8');
    socket.on('data', (c: Buffer) => feed(text.write(c)));
    socket.on('error', () => undefined);
    socket.on('close', () => this.fail(new Error('the call channel to the Runtime Server closed')));
    if (head.length) feed(text.write(head));
  }

  /**
   * Upgrades a connection from `connect` for function `id`; undefined when the function is not
   * registered. A channel a bash worker holds (ADR 0029) asks `hooks` for what only the Runtime
   * Server has (a failed call's stderr, killing the worker).
   */
  static open(
    connect: (opts: unknown, oncreate?: Oncreate) => undefined,
    id: string,
    hooks: BashChannelHooks,
    timeoutMs = 10_000,
  ): Promise<Channel | undefined> {
    return new Promise((resolve, reject) => {
      const req = http.request({
        host: 'runtime',
        path: `/v1/functions/${encodeURIComponent(id)}/calls`,
        headers: { Connection: 'Upgrade', Upgrade: CALLS_UPGRADE },
        createConnection: connect,
      });
      req.once('upgrade', (res, socket, head) => {
        socket.setTimeout(0);
        const by = res.headers[CALL_SERVER_HEADER];
        const secret = res.headers[WORKER_END_HEADER];
        if (by === 'bash-worker' && typeof secret === 'string' && /^[0-9a-f]{32}$/.test(secret))
          resolve(new BashCallChannel(socket, head, secret, hooks));
        else if (by === 'bash-worker') {
          socket.destroy();
          reject(new Error('a bash worker answered a call channel without its end-of-worker secret'));
        } else resolve(new CallChannel(socket, head, typeof by === 'string' ? by : 'runtime-server'));
      });
      req.once('response', (res) => {
        if (res.statusCode === 404) {
          res.resume();
          resolve(undefined);
        } else refusal(res).then(reject, reject);
      });
      req.on('error', reject);
      req.setTimeout(timeoutMs, () => req.destroy(new Error('runtime server call channel: timed out')));
      req.end();
    });
  }

  get open(): boolean {
    return !this.socket.destroyed;
  }

  /** One call; `payload` is compact JSON text (no raw newline). Rejects when the channel closes first. */
  call(payload: string): Promise<InvokeResult> {
    if (this.waiter) return Promise.resolve({ ok: false, reason: 'Busy', error: 'a call is already in flight' });
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
      this.socket.write(`${payload}\n`);
    });
  }

  close(): void {
    this.socket.destroy();
  }

  private answer(line: string): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.resolve(parseInvokeResult(line));
  }

  private fail(err: Error): void {
    const w = this.waiter;
    this.waiter = undefined;
    if (!w) return;
    if (this.servedBy === 'runtime-server') w.reject(err);
    else w.resolve({ ok: false, reason: 'Cancelled', error: `the ${this.servedBy} ended during the call` });
  }
}

/** The Runtime Server answered a call channel with an error instead of a 101 (422: the handler cannot be used). */
export class ChannelRefused extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/** The error of a refused channel, with the message of its answer (a Status-like `{message}`, at most 64 KiB read). */
async function refusal(res: http.IncomingMessage): Promise<ChannelRefused> {
  const code = res.statusCode ?? 0;
  let text = '';
  for await (const c of res) if (text.length < 65536) text += (c as Buffer).toString('utf8');
  let message: unknown;
  try {
    message = (JSON.parse(text) as { message?: unknown }).message;
  } catch {
    /* not JSON: the code says enough */
  }
  return new ChannelRefused(
    code,
    typeof message === 'string' ? message : `runtime server answered ${code} to a call channel`,
  );
}

/** A payload as one line: JSON text with layout newlines is re-serialised compactly. */
export function oneLine(payload: string): string {
  return payload.includes('\n') || payload.includes('\r') ? JSON.stringify(JSON.parse(payload)) : payload;
}
