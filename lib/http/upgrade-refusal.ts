/**
 * Refusing an HTTP upgrade request: the server's `upgrade` event hands over a raw socket, so the
 * error answer is written by hand. One shape for every upgrade endpoint (session WebSockets, the
 * Runtime Server's call channels and session operations): a metav1.Status body, which a client
 * that reads the body finds its `message` in. No dependency beyond node:http (the Runtime Server
 * loads ws only with its first session, and this must not load it earlier).
 */
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';

/** Pure: the bytes of an HTTP/1.1 error answer `code` with a metav1.Status body (`reason`, `message`). */
export function upgradeRefusal(code: number, reason: string, message: string): string {
  const body = JSON.stringify({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    code,
  });
  return (
    `HTTP/1.1 ${code} ${STATUS_CODES[code] ?? reason}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  );
}

/** Answers an upgrade request that will not be upgraded with `upgradeRefusal` and closes the socket. */
export function refuseUpgrade(socket: Duplex, code: number, reason: string, message: string): void {
  socket.end(upgradeRefusal(code, reason, message));
}
