/** The floor of any HTTPS call in the function benchmarks: a JSON echo on localhost, called with keep-alive. */
import { spawn, type ChildProcess } from 'node:child_process';
import type { RequestListener } from 'node:http';
import { createServer, request, Agent } from 'node:https';
import type { AddressInfo } from 'node:net';
import { createCa, issueServing } from '../lib/tls/certs.ts';

export const PAYLOAD = { n: 1, s: 'hello' };

/** The echo server's handler (run in this process, or sent as source text to a child process). */
const echo: RequestListener = (req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.stringify(JSON.parse(Buffer.concat(chunks).toString()));
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  });
};

/** Starts the echo in a child process (cert and key in its environment); resolves with its port. */
function echoProcess(cert: string, key: string): Promise<{ port: number; child: ChildProcess }> {
  const code = `const https = require('node:https');
const srv = https.createServer({ cert: process.env.CERT, key: process.env.KEY }, ${echo.toString()});
srv.listen(0, '127.0.0.1', () => process.stdout.write(srv.address().port + '\\n'));`;
  const child = spawn(process.execPath, ['-e', code], {
    env: { CERT: cert, KEY: key },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    child.stdout?.once('data', (c: Buffer) => resolve({ port: Number(c.toString().trim()), child }));
    child.once('exit', (code) => reject(new Error(`the echo process exited with ${code}`)));
  });
}

/**
 * A bare HTTPS JSON echo on localhost and a keep-alive call of it: the floor of any HTTPS call.
 * In this process by default; `separate` runs the echo in a child process, so the round trip
 * crosses processes as a call to a local server does.
 */
export async function bareEcho(
  separate = false,
): Promise<{ call: () => Promise<void>; fresh: () => Promise<void>; close: () => void }> {
  const now = new Date();
  const ca = await createCa('bench-ca', now, 1);
  const pair = await issueServing(ca, 'bench', { dns: [], ips: ['127.0.0.1'] }, now, 1);
  let port: number;
  let stop: () => void;
  if (separate) {
    const p = await echoProcess(pair.cert, pair.key);
    port = p.port;
    stop = () => p.child.kill('SIGTERM');
  } else {
    const srv = createServer({ cert: pair.cert, key: pair.key }, echo);
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    port = (srv.address() as AddressInfo).port;
    stop = () => srv.close();
  }
  const agent = new Agent({ keepAlive: true, ca: ca.cert });
  const body = JSON.stringify(PAYLOAD);
  const once = (a: Agent | false): Promise<void> =>
    new Promise((resolve, reject) => {
      const tls = a ? {} : { ca: ca.cert };
      const req = request({ host: '127.0.0.1', port, method: 'POST', agent: a, path: '/', ...tls }, (res) => {
        res.resume();
        res.on('end', () => resolve());
      });
      req.on('error', reject);
      req.end(body);
    });
  return {
    call: () => once(agent),
    // A new TCP and TLS connection for the one call, as a client that does not keep its connection.
    fresh: () => once(false),
    close: () => {
      agent.destroy();
      stop();
    },
  };
}

/** One call on a new TLS connection (no keep-alive): TCP and TLS handshakes with the gateway, then the call. */
export function invokeFresh(ep: { url: string; caBundle?: string }, token: string): Promise<void> {
  const body = JSON.stringify(PAYLOAD);
  return new Promise((resolve, reject) => {
    const req = request(
      ep.url,
      {
        method: 'POST',
        agent: false,
        ca: Buffer.from(ep.caBundle ?? '', 'base64').toString('utf8'),
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      },
      (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
