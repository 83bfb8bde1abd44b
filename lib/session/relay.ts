/** Shared by the extension API server and runtimed: relaying session frames, refusing upgrades, and the session constants. */
import type WebSocket from 'ws';

/** The audience of the bound ServiceAccount token the extension API server presents to runtimed. */
export const SESSION_AUDIENCE = 'sessions.kruntimes.io';
/** The audience of a session token for one Runtime Pod: only that Pod's runtimed accepts it. */
export const podAudience = (podUID: string): string => `${SESSION_AUDIENCE}/pods/${podUID}`;
/** runtimed's container in a Runtime Pod and the name of its session port there. */
export const RUNTIMED_CONTAINER = 'runtimed';
export const SESSION_PORT_NAME = 'session';
/** The Pod condition where runtimed publishes its session port and certificate fingerprint. */
export const SESSION_CONDITION = 'kruntimes.io/SessionServer';

/** Answers an upgrade request that will not become a WebSocket with a metav1.Status and closes the socket. */
export { refuseUpgrade } from '../http/upgrade-refusal.ts';

/** Bytes a relay lets queue towards a slow side before it stops reading from the other one. */
export const RELAY_HIGH_WATER = 1 << 20;

/** Forwards from -> to; stops reading `from` while more than RELAY_HIGH_WATER bytes wait to be written to `to`. */
function pipe(from: WebSocket, to: WebSocket, highWater: number): void {
  let queued = 0;
  let paused = false;
  from.on('message', (m: Buffer, bin: boolean) => {
    if (to.readyState !== to.OPEN) return;
    queued += m.length;
    to.send(m, { binary: bin }, () => {
      queued -= m.length;
      if (paused && queued <= highWater / 2) {
        paused = false;
        from.resume();
      }
    });
    if (!paused && queued > highWater) {
      paused = true;
      from.pause();
    }
  });
}

/**
 * Relays messages both ways unchanged, with flow control (a side that does not read slows the
 * other down instead of growing this process's memory); either side closing closes the other
 * with the same code.
 */
export function relay(a: WebSocket, b: WebSocket, highWater = RELAY_HIGH_WATER): void {
  pipe(a, b, highWater);
  pipe(b, a, highWater);
  const closeOther =
    (o: WebSocket) =>
    (code: number): void => {
      if (o.readyState === o.OPEN) o.close(code >= 1000 && code < 5000 && code !== 1005 && code !== 1006 ? code : 1000);
      else if (o.readyState === o.CONNECTING) o.terminate();
    };
  a.on('close', closeOther(b));
  b.on('close', closeOther(a));
  a.on('error', () => b.terminate());
  b.on('error', () => a.terminate());
}
