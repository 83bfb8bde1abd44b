import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import pino from 'pino';
import type { KubeClient } from '../../lib/kube/client.ts';
import { artifactsRouter } from '../artifacts/handler.ts';
import { logsRouter } from '../logs/handler.ts';
import { objectPathProblem } from './names.ts';

describe('aggregated resources: namespace and name validation (issue 11 item 12)', () => {
  it('accepts DNS-1123 namespaces and names, refuses everything else', () => {
    assert.equal(objectPathProblem('team-a', 'build-1.x'), undefined);
    for (const [ns, name] of [
      ['..', 'r'],
      ['Team', 'r'],
      ['a/b', 'r'],
      ['a'.repeat(64), 'r'],
      ['ns', '..'],
      ['ns', 'a/b'],
      ['ns', '-r'],
      ['ns', 'r\n'],
      ['ns', 'a'.repeat(254)],
      ['', 'r'],
      ['ns', ''],
    ] as const) {
      assert.match(objectPathProblem(ns, name) ?? '', /is not a valid (namespace|object) name/, `${ns}/${name}`);
    }
  });

  describe('the logs and artifacts routes answer 400 before touching the API server', () => {
    let srv: Server;
    let base: string;
    const touched: string[] = [];
    before(async () => {
      const client = new Proxy({} as KubeClient, {
        get: (_t, prop) => () => {
          touched.push(String(prop));
          return Promise.reject(new Error('the API server must not be called'));
        },
      });
      const app = express();
      const log = pino({ level: 'silent' });
      app.use(logsRouter(client, log));
      app.use(artifactsRouter(client, log));
      srv = app.listen(0, '127.0.0.1');
      await once(srv, 'listening');
      base = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
    });
    after(() => srv.close());

    for (const path of [
      '/apis/logs.kruntimes.io/v1alpha1/namespaces/Bad_NS/runs/r/log',
      '/apis/logs.kruntimes.io/v1alpha1/namespaces/ns/runs/..%2F..%2Fsecrets/log',
      '/apis/artifacts.kruntimes.io/v1alpha1/namespaces/ns/runs/..%2Fx/artifacts',
      '/apis/artifacts.kruntimes.io/v1alpha1/namespaces/a%00b/runs/r/artifacts/a.txt',
    ]) {
      it(`GET ${path} -> 400 BadRequest`, async () => {
        const res = await fetch(`${base}${path}`);
        assert.equal(res.status, 400);
        const body = (await res.json()) as { reason: string; message: string };
        assert.equal(body.reason, 'BadRequest');
        assert.match(body.message, /is not a valid (namespace|object) name/);
        assert.deepEqual(touched, []);
      });
    }
  });
});
