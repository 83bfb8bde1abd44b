/**
 * A TCP gate in front of a server of this host (TLS passes through untouched, so the server's
 * certificate still names the address): `pass` forwards, `hold` keeps new connections open and
 * unanswered until the gate passes again, `reset` refuses them. e2e specs put it in front of the
 * Git Server or an external repository to make a clone or a sync fail, or take as long as they want.
 */
import net from 'node:net';

export type GateMode = 'pass' | 'hold' | 'reset';

export interface TcpGate {
  /** The gate's port on the same address as its target. */
  port: number;
  mode: GateMode;
  /** Connections accepted so far (a clone or sync attempt opens at least one). */
  readonly accepted: number;
  /** Connections held now. */
  readonly held: number;
  /** Sets the mode; `pass` forwards the connections held meanwhile. */
  set(mode: GateMode): void;
  close(): Promise<void>;
}

export async function startTcpGate(host: string, targetPort: number): Promise<TcpGate> {
  const open = new Set<net.Socket>();
  const held: net.Socket[] = [];
  let accepted = 0;
  const forward = (client: net.Socket): void => {
    const upstream = net.connect(targetPort, host);
    open.add(upstream);
    upstream.on('close', () => open.delete(upstream));
    const end = (): void => {
      client.destroy();
      upstream.destroy();
    };
    upstream.on('error', end);
    client.on('error', end);
    client.pipe(upstream).pipe(client);
    client.resume();
  };
  const srv = net.createServer((client) => {
    accepted++;
    open.add(client);
    client.on('close', () => open.delete(client));
    client.on('error', () => client.destroy());
    if (gate.mode === 'reset') client.resetAndDestroy();
    else if (gate.mode === 'hold') {
      client.pause();
      held.push(client);
    } else forward(client);
  });
  await new Promise<void>((r) => srv.listen(0, host, () => r()));
  const gate: TcpGate = {
    port: (srv.address() as net.AddressInfo).port,
    mode: 'pass',
    get accepted() {
      return accepted;
    },
    get held() {
      return held.length;
    },
    set(mode) {
      gate.mode = mode;
      if (mode === 'pass') for (const c of held.splice(0)) if (!c.destroyed) forward(c);
      if (mode === 'reset') for (const c of held.splice(0)) c.resetAndDestroy();
    },
    close: async () => {
      for (const s of open) s.destroy();
      await new Promise<void>((r) => srv.close(() => r()));
    },
  };
  return gate;
}
