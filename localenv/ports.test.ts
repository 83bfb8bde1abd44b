/** Ports for servers another process binds later: below the ephemeral range, free when chosen. */
import assert from 'node:assert/strict';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { ephemeralRange, freePort, freeServerPort } from './ports.ts';

const listen = (port: number, host: string): Promise<Server> =>
  new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(port, host, () => resolve(srv));
  });

describe('localenv ports', () => {
  it('reads the ephemeral range (and falls back to the kernel default on nonsense)', () => {
    assert.deepEqual(ephemeralRange('32768\t60999\n'), [32768, 60999]);
    assert.deepEqual(ephemeralRange('1024 65535'), [1024, 65535]);
    assert.deepEqual(ephemeralRange('x'), [32768, 60999]);
  });

  it('a server port is below the ephemeral range, where no outgoing connection takes its local port (a port-0 listen is not)', async () => {
    const [low, high] = ephemeralRange();
    const p0 = await freePort('0.0.0.0');
    assert.ok(p0 >= low && p0 <= high, `a port-0 listen gives an ephemeral port (${p0})`);
    // Why it matters: an outgoing connection's local port is from that range, and while the
    // connection lives, a server cannot listen on that port on every address.
    const target = await listen(0, '127.0.0.1');
    const client = await new Promise<Socket>((resolve) => {
      const c = connect((target.address() as AddressInfo).port, '127.0.0.1', () => resolve(c));
    });
    try {
      await assert.rejects(listen(client.localPort ?? 0, '0.0.0.0'), /EADDRINUSE/);
    } finally {
      client.destroy();
      target.close();
    }
    const p = await freeServerPort('0.0.0.0');
    assert.ok(p < low && p >= Math.max(1024, low - 8192), `${p} is below ${low}`);
    (await listen(p, '0.0.0.0')).close();
  });

  it('skips a port something listens on', async () => {
    const range: [number, number] = [32768, 60999];
    const taken = await freeServerPort('127.0.0.1', { range });
    const holder = await listen(taken, '127.0.0.1');
    try {
      // The first pick is the taken port, the second another one.
      const picks = [(taken - 24576) / 8192, 0.5];
      const got = await freeServerPort('127.0.0.1', { range, random: () => picks.shift() ?? 0.25 });
      assert.notEqual(got, taken);
      assert.equal(got, 24576 + 4096);
    } finally {
      holder.close();
    }
  });
});
