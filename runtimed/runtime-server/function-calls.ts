/**
 * The call channel of a registered function (issue 15): runtimed upgrades one dialled-in
 * connection per function (`GET /v1/functions/:id/calls`, `Upgrade: kruntimes-function-calls`)
 * and then each call is one line each way, with no HTTP framing on the hot path:
 *   runtimed -> Runtime Server   the payload, compact JSON text (one line)
 *   Runtime Server -> runtimed   the InvokeResult as JSON (one line)
 * Calls on a channel are answered in order, one at a time; the function is looked up per call, so
 * an unregistered (or fenced) function answers NotRegistered and the channel stays usable.
 */
import type { Duplex } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { FUNCTION_IO_LIMIT, type Functions, type InvokeResult } from './functions.ts';

export const CALLS_UPGRADE = 'kruntimes-function-calls';
const CALLS_PATH = /^\/v1\/functions\/([^/]+)\/calls$/;
/** Longest line either way: a 1 MiB payload or output plus the result's envelope. */
export const CALL_LINE_LIMIT = 2 * FUNCTION_IO_LIMIT + 4096;

/** Pure: the function id of a call-channel path, or undefined. */
export function callsPathId(pathname: string): string | undefined {
  const m = CALLS_PATH.exec(pathname);
  return m?.[1] ? decodeURIComponent(m[1]) : undefined;
}

/**
 * Splits a text stream into lines; `onOverflow` when a line grows past `limit` characters (the
 * caller then drops the connection). Returns the function to feed chunks to.
 */
export function lineSplitter(
  limit: number,
  onLine: (line: string) => void,
  onOverflow: () => void,
): (chunk: string) => void {
  let buf = '';
  return (chunk) => {
    let start = 0;
    let nl = chunk.indexOf('\n');
    while (nl >= 0) {
      const line = buf + chunk.slice(start, nl);
      buf = '';
      onLine(line);
      start = nl + 1;
      nl = chunk.indexOf('\n', start);
    }
    buf += chunk.slice(start);
    if (buf.length > limit) {
      buf = '';
      onOverflow();
    }
  };
}

/** Serves a call channel on an upgraded connection (the 101 answer is written here). */
export function serveCallChannel(
  socket: Duplex,
  head: Buffer,
  id: string,
  fns: Functions,
  fenced: () => boolean,
): void {
  socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: ${CALLS_UPGRADE}\r\nConnection: Upgrade\r\n\r\n`);
  let chain = Promise.resolve();
  const one = async (payload: string): Promise<void> => {
    const f = fns.get(id);
    let r: InvokeResult;
    if (fenced()) r = { ok: false, reason: 'NotRegistered', error: 'fenced: the execution lease lapsed' };
    else if (!f) r = { ok: false, reason: 'NotRegistered', error: `function ${id} not registered` };
    else r = await f.invoke(payload || 'null');
    if (!socket.destroyed) socket.write(`${JSON.stringify(r)}\n`);
  };
  const feed = lineSplitter(
    CALL_LINE_LIMIT,
    (line) => {
      chain = chain
        .then(() => one(line))
        .catch(() => {
          socket.destroy();
        });
    },
    () => socket.destroy(),
  );
  // The socket came from an HTTP server, which forbids setEncoding: decode here.
  const text = new StringDecoder('utf8');
  socket.on('error', () => undefined);
  socket.on('data', (c: Buffer) => feed(text.write(c)));
  // A connection first given to a bash worker that did not start was paused by the spawn.
  socket.resume();
  if (head.length) feed(text.write(head));
}
