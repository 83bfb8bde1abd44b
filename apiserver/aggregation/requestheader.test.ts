import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { authenticate, RequestHeaderSource, type RequestHeaderConfig } from './requestheader.ts';

const base: RequestHeaderConfig = {
  clientCA: 'CA-1',
  allowedNames: ['front-proxy-client'],
  usernameHeaders: ['X-Remote-User'],
  groupHeaders: ['X-Remote-Group'],
  extraPrefixes: ['X-Remote-Extra-'],
  uidHeaders: [],
};

describe('requestheader configuration reload', () => {
  it('tells listeners when the client CA rotates, and only then', async () => {
    let next = base;
    const source = await RequestHeaderSource.start(() => Promise.resolve(next));
    const heard: string[] = [];
    source.onClientCAChange((ca) => heard.push(ca));
    await source.refresh();
    assert.deepEqual(heard, []);
    next = { ...base, clientCA: 'CA-1\nCA-2' };
    await source.refresh();
    assert.deepEqual(heard, ['CA-1\nCA-2']);
    assert.equal(source.current().clientCA, 'CA-1\nCA-2');
    next = { ...next, allowedNames: ['other'] };
    await source.refresh();
    assert.deepEqual(heard, ['CA-1\nCA-2'], 'other changes are picked up without a TLS reload');
    assert.deepEqual(source.current().allowedNames, ['other']);
  });

  it('keeps the previous configuration when a reload fails', async () => {
    let fail = false;
    const source = await RequestHeaderSource.start(() =>
      fail ? Promise.reject(new Error('forbidden')) : Promise.resolve(base),
    );
    fail = true;
    await assert.rejects(source.refresh(), /forbidden/);
    assert.equal(source.current().clientCA, 'CA-1');
  });
});

describe('requestheader identity', () => {
  it('keeps every group and extra value sent as repeated headers', async () => {
    const srv = http.createServer((req, res) => {
      const sock = req.socket as unknown as { authorized: boolean; getPeerCertificate: () => object };
      sock.authorized = true;
      sock.getPeerCertificate = () => ({ subject: { CN: 'front-proxy-client' } });
      res.end(JSON.stringify(authenticate(req, base)));
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as AddressInfo).port;
    const body = await new Promise<string>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, path: '/' }, (res) => {
        let b = '';
        res.on('data', (c: Buffer) => (b += c.toString()));
        res.on('end', () => resolve(b));
      });
      req.setHeader('X-Remote-User', 'kruntimes-admin');
      req.setHeader('X-Remote-Group', ['system:masters', 'system:authenticated']);
      req.setHeader('X-Remote-Extra-Scopes', ['a', 'b']);
      req.on('error', reject);
      req.end();
    });
    srv.close();
    assert.deepEqual(JSON.parse(body), {
      username: 'kruntimes-admin',
      groups: ['system:masters', 'system:authenticated'],
      extra: { scopes: ['a', 'b'] },
    });
  });
});
