/**
 * One authorised session operation relayed to the Runtime Server (session-server.ts and the
 * Runtime Gateway): imported with the first operation, so ws loads only on a Pod that serves one.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import WebSocket, { type ClientOptions, type WebSocketServer } from 'ws';
import { PROTOCOLS } from '../lib/session/channel.ts';
import { MAX_FRAME_BYTES } from '../lib/session/frames.ts';
import { refuseUpgrade, relay } from '../lib/session/relay.ts';
import type { DialIn } from './dial-in.ts';
import { SESSION_HEADER, type SessionSpec } from './runtime-server/sessions.ts';
import type { SessionTarget } from './session-server.ts';

export { sessionWebSocketServer } from '../lib/session/frames.ts';

/**
 * One authorised session operation: opens it on the Runtime Server (the request's `command` and
 * `tty` query parameters, the WebSocket subprotocol), then accepts the upgrade and relays frames
 * unchanged both ways. Shared by the session port and the Runtime Gateway.
 */
export function startOperation(
  channel: DialIn,
  wss: WebSocketServer,
  target: SessionTarget,
  up: { req: IncomingMessage; socket: Duplex; head: Buffer },
): void {
  const { req, socket, head } = up;
  const url = new URL(req.url ?? '/', 'https://runtimed');
  const command = url.searchParams.getAll('command');
  const spec: SessionSpec = {
    ...target.spec,
    command: command.length ? command : target.spec.command,
    ...(url.searchParams.get('tty') === 'true' ? { tty: true } : {}),
  };
  const protocol =
    String(req.headers['sec-websocket-protocol'] ?? PROTOCOLS[0])
      .split(',')
      .map((p) => p.trim())
      .find((p) => (PROTOCOLS as readonly string[]).includes(p)) ?? PROTOCOLS[0];
  const inner = new WebSocket('ws://runtime/v1/sessions', [protocol ?? ''], {
    createConnection: channel.createConnection as unknown as ClientOptions['createConnection'],
    headers: { [SESSION_HEADER]: Buffer.from(JSON.stringify(spec)).toString('base64') },
    maxPayload: MAX_FRAME_BYTES,
  });
  inner.once('error', (err) => {
    refuseUpgrade(socket, 503, 'ServiceUnavailable', `the Runtime Server did not accept the operation: ${err.message}`);
  });
  inner.once('open', () => {
    wss.handleUpgrade(req, socket, head, (ws) => {
      target.attach(ws);
      relay(ws, inner);
    });
  });
}
