import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, unwatchFile, writeFileSync } from 'node:fs';
import type https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import express from 'express';
import { pino } from 'pino';
import { createCa, issueServing } from '../lib/tls/certs.ts';
import { RequestHeaderSource } from './aggregation/requestheader.ts';
import { secureServer } from './server.ts';

/** One keep-alive TLS connection that sends raw HTTP/1.1 requests and sees the server close it. */
class RawConnection {
  closedByServer = false;
  private buffered = '';
  private readonly sock: tls.TLSSocket;

  constructor(port: number, ca: string) {
    this.sock = tls.connect({ host: '127.0.0.1', port, ca, servername: 'localhost' });
    this.sock.setEncoding('utf8');
    this.sock.on('data', (d: string) => (this.buffered += d));
    this.sock.on('end', () => (this.closedByServer = true));
    this.sock.on('error', () => (this.closedByServer = true));
  }

  async post(path: string): Promise<string> {
    this.buffered = '';
    this.sock.write(`POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n{}`);
    const deadline = Date.now() + 5_000;
    while (!this.buffered.includes('\r\n\r\nok') && Date.now() < deadline) await sleep(20);
    return this.buffered.split('\r\n')[0] ?? '';
  }

  destroy(): void {
    this.sock.destroy();
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('extension server keep-alive (kube-apiserver reuses idle webhook connections)', function () {
  this.timeout(20_000);
  let dir = '';
  let server: https.Server;
  let ca = '';
  const cfg = { certFile: '', keyFile: '' };

  before(async () => {
    const now = new Date();
    const authority = await createCa('keepalive-ca', now, 1);
    ca = authority.cert;
    const serving = await issueServing(authority, 'localhost', { dns: ['localhost'], ips: ['127.0.0.1'] }, now, 1);
    dir = mkdtempSync(join(tmpdir(), 'krt-keepalive-'));
    cfg.certFile = join(dir, 'tls.crt');
    cfg.keyFile = join(dir, 'tls.key');
    writeFileSync(cfg.certFile, serving.cert);
    writeFileSync(cfg.keyFile, serving.key);
    const source = await RequestHeaderSource.start(() =>
      Promise.resolve({
        clientCA: authority.cert,
        allowedNames: [],
        usernameHeaders: [],
        groupHeaders: [],
        extraPrefixes: [],
        uidHeaders: [],
      }),
    );
    const app = express();
    app.post('/admission/x', (_req, res) => {
      res.type('text/plain').send('ok');
    });
    server = secureServer(cfg, app, source, pino({ level: 'silent' }));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  });

  after(async () => {
    unwatchFile(cfg.certFile);
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps an idle connection open past Node’s 5 s default, so a reused connection takes the next review', async () => {
    // client-go keeps idle connections for 90 s and does not retry a POST that fails on one; a
    // server closing first races the next admission review ("write: broken pipe", CI stop 21).
    const conn = new RawConnection((server.address() as AddressInfo).port, ca);
    try {
      assert.equal(await conn.post('/admission/x'), 'HTTP/1.1 200 OK');
      await sleep(6_500);
      assert.equal(conn.closedByServer, false, 'the server closed an idle keep-alive connection');
      assert.equal(await conn.post('/admission/x'), 'HTTP/1.1 200 OK');
    } finally {
      conn.destroy();
    }
  });

  it('outlives client-go’s idle timeout', () => {
    assert.ok(server.keepAliveTimeout > 90_000, `keepAliveTimeout ${server.keepAliveTimeout} ms`);
  });
});
