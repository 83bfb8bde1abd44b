import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { failureStatusJson, writeFailureStatus } from './status.ts';

describe('lib/kube failure Status', () => {
  it('builds the metav1.Status body in a fixed field order', () => {
    assert.equal(
      failureStatusJson(404, 'NotFound', 'no such endpoint'),
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","code":404,"reason":"NotFound","message":"no such endpoint"}',
    );
  });

  it('answers it with its code, JSON type, exact length and extra headers', async () => {
    const server = createServer((_req, res) =>
      writeFailureStatus(res, 401, 'Unauthorized', 'a bearer token is required – ü', { 'WWW-Authenticate': 'Bearer' }),
    );
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const { port } = server.address() as AddressInfo;
      const res = await new Promise<import('node:http').IncomingMessage>((resolve, reject) =>
        request({ host: '127.0.0.1', port }, resolve).on('error', reject).end(),
      );
      const chunks: Buffer[] = [];
      for await (const c of res) chunks.push(c as Buffer);
      const body = Buffer.concat(chunks);
      assert.equal(res.statusCode, 401);
      assert.equal(res.headers['content-type'], 'application/json');
      assert.equal(res.headers['www-authenticate'], 'Bearer');
      assert.equal(Number(res.headers['content-length']), body.length);
      assert.deepEqual(JSON.parse(body.toString()), {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        code: 401,
        reason: 'Unauthorized',
        message: 'a bearer token is required – ü',
      });
    } finally {
      server.close();
    }
  });
});
