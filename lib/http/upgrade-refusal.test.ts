import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, request, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { upgradeRefusal, refuseUpgrade } from './upgrade-refusal.ts';

describe('lib/http/upgrade-refusal: the error answer to an upgrade request', () => {
  it('is a complete HTTP/1.1 answer whose body is a metav1.Status with the message (multi-byte text counted in bytes)', () => {
    const text = upgradeRefusal(422, 'Invalid', 'sourcing h.sh failed: é');
    const [head, body] = text.split('\r\n\r\n') as [string, string];
    assert.match(head, /^HTTP\/1\.1 422 Unprocessable Entity\r\n/);
    assert.match(head, new RegExp(`\r\nContent-Length: ${Buffer.byteLength(body)}\r\n`));
    assert.deepEqual(JSON.parse(body), {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'sourcing h.sh failed: é',
      reason: 'Invalid',
      code: 422,
    });
  });

  it('reaches an HTTP client that asked to upgrade as a response it can read, and the socket closes', async () => {
    const srv = createServer();
    srv.on('upgrade', (_req, socket) => refuseUpgrade(socket, 503, 'Fenced', 'fenced: the execution lease lapsed'));
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    try {
      const req = request({
        port: (srv.address() as AddressInfo).port,
        host: '127.0.0.1',
        headers: { Connection: 'Upgrade', Upgrade: 'x' },
      });
      req.end();
      const [res] = (await once(req, 'response')) as [IncomingMessage];
      let body = '';
      for await (const c of res) body += (c as Buffer).toString('utf8');
      assert.equal(res.statusCode, 503);
      assert.equal((JSON.parse(body) as { message: string }).message, 'fenced: the execution lease lapsed');
    } finally {
      srv.close();
    }
  });
});
