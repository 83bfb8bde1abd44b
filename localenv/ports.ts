/** Free loopback TCP ports, read back from a listen on port 0. */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export async function freePorts(n: number): Promise<number[]> {
  const out = new Set<number>();
  while (out.size < n) out.add(await freePort());
  return [...out];
}

/** The kernel's ephemeral port range ("low high", /proc/sys/net/ipv4/ip_local_port_range). */
export function ephemeralRange(text?: string): [number, number] {
  let t = text;
  if (t === undefined) {
    try {
      t = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8');
    } catch {
      t = '32768 60999';
    }
  }
  const [low, high] = t.trim().split(/\s+/).map(Number);
  return low && high && low <= high ? [low, high] : [32768, 60999];
}

/** Whether host:port can be listened on now. */
function listenable(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, host, () => srv.close(() => resolve(true)));
  });
}

/**
 * A port free now on host and below the kernel's ephemeral range, for a server that another
 * process binds later (a Pod the node agent starts). A port from a listen on port 0 is in the
 * ephemeral range, from which every outgoing connection on the machine takes its local port: one
 * opened in between (a watch, a pooled client connection) holds the port, and the server cannot
 * bind it for as long as that connection lives.
 */
export async function freeServerPort(
  host = '127.0.0.1',
  o: { range?: [number, number]; random?: () => number; tries?: number } = {},
): Promise<number> {
  const [low] = o.range ?? ephemeralRange();
  const from = Math.max(1024, low - 8192);
  const random = o.random ?? Math.random;
  for (let i = 0; i < (o.tries ?? 64); i++) {
    const port = from + Math.floor(random() * (low - from));
    if (await listenable(host, port)) return port;
  }
  throw new Error(`no free port below the ephemeral range (${from}-${low - 1}) on ${host}`);
}
