/** The floor of any HTTPS call in the function benchmarks: a JSON echo on localhost, called with keep-alive. */
import { createServer, request, Agent } from 'node:https';
import type { AddressInfo } from 'node:net';
import { createCa, issueServing } from '../lib/tls/certs.ts';

export const PAYLOAD = { n: 1, s: 'hello' };

/** A bare HTTPS JSON echo on localhost and a keep-alive call of it: the floor of any HTTPS call. */
export async function bareEcho(): Promise<{ call: () => Promise<void>; close: () => void }> {
  const now = new Date();
  const ca = await createCa('bench-ca', now, 1);
  const pair = await issueServing(ca, 'bench', { dns: [], ips: ['127.0.0.1'] }, now, 1);
  const srv = createServer({ cert: pair.cert, key: pair.key }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.stringify(JSON.parse(Buffer.concat(chunks).toString()));
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
      res.end(body);
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as AddressInfo).port;
  const agent = new Agent({ keepAlive: true, ca: ca.cert });
  const body = JSON.stringify(PAYLOAD);
  const call = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, method: 'POST', agent, path: '/' }, (res) => {
        res.resume();
        res.on('end', () => resolve());
      });
      req.on('error', reject);
      req.end(body);
    });
  return {
    call,
    close: () => {
      agent.destroy();
      srv.close();
    },
  };
}
