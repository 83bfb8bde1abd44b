/**
 * The Runtime Server end of the channel to runtimed (see runtimed/dial-in.ts): instead of
 * listening on a path in a directory a Run could write, the Runtime Server dials runtimed's
 * socket and serves HTTP on each connection, keeping `idle` connections ready. A connection is
 * busy from its first request on; a closed or busy one is replaced. While runtimed is not
 * listening (it starts, restarts) dialling is retried every retryMs.
 */
import type { Server } from 'node:http';
import { connect, type Socket } from 'node:net';

export interface DialOut {
  /** Connections currently dialled in and not yet used. */
  idle: () => number;
  close: () => void;
}

export function dialOut(path: string, srv: Server, opts: { idle?: number; retryMs?: number } = {}): DialOut {
  const want = opts.idle ?? 4;
  const retryMs = opts.retryMs ?? 200;
  const waiting = new Set<Socket>();
  let closed = false;
  let retry: NodeJS.Timeout | undefined;
  const busy = (s: Socket): void => {
    if (waiting.delete(s)) top();
  };
  const dial = (): void => {
    const s = connect(path);
    waiting.add(s);
    let connected = false;
    s.on('error', () => undefined);
    s.once('connect', () => {
      connected = true;
      srv.emit('connection', s);
    });
    s.once('close', () => {
      const wasIdle = waiting.delete(s);
      if (closed || !wasIdle) return;
      if (connected) top();
      else if (!retry)
        retry = setTimeout(() => {
          retry = undefined;
          top();
        }, retryMs);
    });
  };
  const top = (): void => {
    while (!closed && !retry && waiting.size < want) dial();
  };
  srv.on('request', (req) => busy(req.socket));
  srv.on('upgrade', (req) => busy(req.socket));
  top();
  return {
    idle: () => waiting.size,
    close: () => {
      closed = true;
      if (retry) clearTimeout(retry);
      for (const s of waiting) s.destroy();
    },
  };
}
