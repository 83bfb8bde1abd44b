/** Shared by the extension API server and runtimed: relaying session frames and the session constants. */
import WebSocket from 'ws';

/** The audience of the bound ServiceAccount token the extension API server presents to runtimed. */
export const SESSION_AUDIENCE = 'sessions.kruntimes.io';
/** The Pod condition where runtimed publishes its session port and certificate fingerprint. */
export const SESSION_CONDITION = 'kruntimes.io/SessionServer';

/** Relays messages both ways unchanged; either side closing closes the other with the same code. */
export function relay(a: WebSocket, b: WebSocket): void {
  a.on('message', (m: Buffer, bin: boolean) => { if (b.readyState === WebSocket.OPEN) b.send(m, { binary: bin }); });
  b.on('message', (m: Buffer, bin: boolean) => { if (a.readyState === WebSocket.OPEN) a.send(m, { binary: bin }); });
  const closeOther = (o: WebSocket) => (code: number): void => {
    if (o.readyState === WebSocket.OPEN) o.close(code >= 1000 && code < 5000 && code !== 1005 && code !== 1006 ? code : 1000);
    else if (o.readyState === WebSocket.CONNECTING) o.terminate();
  };
  a.on('close', closeOther(b));
  b.on('close', closeOther(a));
  a.on('error', () => b.terminate());
  b.on('error', () => a.terminate());
}
