/**
 * The Runtime Server end of the channel to runtimed (see runtimed/dial-in.ts): instead of
 * listening on a path in a directory a Run could write, the Runtime Server dials runtimed's
 * socket and serves HTTP on each connection, keeping `idle` connections ready. A connection is
 * busy from its first request on; a busy one is replaced at once. An idle connection that closes
 * is redialled after a backoff (redialDelayMs), never at once: a peer that accepts and closes at
 * once (a process out of file descriptors does) must not turn both ends into a busy loop. A dial
 * that nothing accepts (runtimed starts or restarts and does not listen yet) is retried every
 * retryMs without doubling: a refused connect costs nothing on either end, and a doubling delay
 * kept a starting Pod waiting up to the next round (100, 200, 400, 800 ms) after runtimed
 * listened (issue 17). When no dial has connected for
 * giveUpMs, runtimed is gone for good: dialling stops and onGone is called (the Runtime Server
 * then exits; a live node agent restarts it).
 */
import type { Server } from 'node:http';
import { connect, type Socket } from 'node:net';

export interface DialOut {
  /** Connections currently dialled in and not yet used. */
  idle: () => number;
  close: () => void;
}

export interface DialOutOptions {
  idle?: number;
  /** The redial delay while nothing accepts; after closed connections the first, doubling with each
   * such round in a row up to maxRetryMs. */
  retryMs?: number;
  maxRetryMs?: number;
  /** How long dials may fail in a row before runtimed counts as gone for good. */
  giveUpMs?: number;
  onGone?: () => void;
  now?: () => number;
}

/** How the Runtime Server waits for runtimed: every 100 ms while nothing listens; 100 ms doubling to 1 s per
 * round after connections that closed; gone after 2 minutes without a connection. */
export const DIAL_DEFAULTS = { retryMs: 100, maxRetryMs: 1000, giveUpMs: 120_000 };

/** The delay before the next dial after `failures` failures in a row (at least 1). */
export function redialDelayMs(failures: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.max(0, Math.min(failures - 1, 30)));
}

/** Whether runtimed is gone for good: dials have failed since `failingSince` for at least giveUpMs. */
export function peerGone(failingSince: number | undefined, now: number, giveUpMs: number): boolean {
  return failingSince !== undefined && now - failingSince >= giveUpMs;
}

export function dialOut(path: string, srv: Server, opts: DialOutOptions = {}): DialOut {
  const want = opts.idle ?? 4;
  const { retryMs, maxRetryMs, giveUpMs } = { ...DIAL_DEFAULTS, ...opts };
  const now = opts.now ?? Date.now;
  const waiting = new Set<Socket>();
  let closed = false;
  let retry: NodeJS.Timeout | undefined;
  let failures = 0;
  let failingSince: number | undefined;
  const busy = (s: Socket): void => {
    if (waiting.delete(s)) top();
  };
  /** refused: the dial never connected (nothing listens), so no peer can be looping with us. */
  const failed = (refused: boolean): void => {
    failingSince ??= now();
    if (peerGone(failingSince, now(), giveUpMs)) {
      close();
      opts.onGone?.();
      return;
    }
    if (retry) return; // one redial round at a time: the failures of one round count once
    if (!refused) failures++;
    retry = setTimeout(
      () => {
        retry = undefined;
        top();
      },
      refused ? retryMs : redialDelayMs(failures, retryMs, maxRetryMs),
    );
  };
  const dial = (): void => {
    const s = connect(path);
    let connected = false;
    waiting.add(s);
    s.on('error', () => undefined);
    s.once('connect', () => {
      connected = true;
      failures = 0;
      failingSince = undefined;
      srv.emit('connection', s);
    });
    s.once('close', () => {
      if (waiting.delete(s) && !closed) failed(!connected);
    });
  };
  const top = (): void => {
    while (!closed && !retry && waiting.size < want) dial();
  };
  const close = (): void => {
    closed = true;
    if (retry) clearTimeout(retry);
    for (const s of waiting) s.destroy();
  };
  srv.on('request', (req) => busy(req.socket));
  srv.on('upgrade', (req) => busy(req.socket));
  top();
  return { idle: () => waiting.size, close };
}
