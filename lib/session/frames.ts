/**
 * The bound on one session WebSocket message (issue 11 item 8). ws accepts 100 MiB frames by
 * default, which lets any peer make a server buffer that much per message; every session
 * WebSocket (client and server, in the extension API server, runtimed, the Runtime Server and
 * the CLI) is created with this maxPayload instead. A larger message closes the connection with
 * 1009 (Message Too Big). Senders never come close: stdin and process output travel in pipe
 * chunks of at most 64 KiB.
 */
import WebSocket, { WebSocketServer, type ClientOptions } from 'ws';
import { PROTOCOLS } from './channel.ts';

export const MAX_FRAME_BYTES = 1 << 20;

/** A noServer WebSocketServer for the session protocols with the frame bound. */
export function sessionWebSocketServer(): WebSocketServer {
  return new WebSocketServer({
    noServer: true,
    maxPayload: MAX_FRAME_BYTES,
    handleProtocols: (p) => PROTOCOLS.find((x) => p.has(x)) ?? false,
  });
}

/** A session WebSocket client with the frame bound. */
export function sessionWebSocket(url: URL | string, protocols: string[], opts: ClientOptions): WebSocket {
  return new WebSocket(url, protocols, { ...opts, maxPayload: MAX_FRAME_BYTES });
}
