import assert from 'node:assert/strict';
import https from 'node:https';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { TerminalError, WaitingError } from '../lib/fn/errors.ts';
import { FakeState } from '../lib/fn/fake-state.ts';
import { R } from '../lib/fn/resources.ts';
import { WIRE_API_VERSION, WIRE_KIND } from '../lib/fn/wire.ts';
import { createCa, issueServing } from '../lib/tls/certs.ts';
import { functionApp } from './fnserver.ts';
import { CaAgent, loadTransportConfig, WebhookTransport, type TransportConfig } from './transport.ts';
import { obj, reader } from './transport-fixtures.ts';

const log = pino({ level: 'silent' });

describe('webhook transport (real TLS server, wire format v1alpha1)', () => {
  let server: https.Server;
  let address = '';
  let cfg: TransportConfig;
  let agent: https.Agent;
  let rounds: number[] = [];
  let transport: WebhookTransport;
  let serverCa = '';

  before(async () => {
    const now = new Date();
    const ca = await createCa('test-ca', now, 2);
    serverCa = ca.cert;
    const cert = await issueServing(ca, 'fn', { dns: ['*.ns.svc'], ips: [] }, now, 1);
    server = https.createServer({ cert: cert.cert, key: cert.key }, functionApp([reader], log));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    address = `127.0.0.1:${(server.address() as { port: number }).port}`;
    cfg = { ...loadTransportConfig({ KRT_FUNCTION_TRANSPORT: 'webhook' }, 'ns'), caFile: '' };
    agent = new https.Agent({ keepAlive: true, ca: ca.cert });
    transport = new WebhookTransport({
      endpoints: { pick: (svc) => (svc === 'kruntimes-fn-reader' ? address : undefined) },
      agent,
      cfg,
      onRounds: (_fn, n) => rounds.push(n),
    });
  });
  after(() => {
    agent.destroy();
    server.close();
  });

  const state = new FakeState([
    [R.runtimes, obj('rt', 'a')],
    [R.runtimes, obj('rt', 'b')],
    [R.runtimes, obj('worse', 'b', { bad: 'y' })],
    [R.pods, obj('p1', 'a', { runtime: 'rt' })],
    [R.pods, obj('p2', 'a', { runtime: 'other' })],
    [R.pods, obj('p3', 'b', { runtime: 'rt' })],
  ]);
  const now = new Date('2026-01-02T03:04:05.000Z');

  it('returns exactly the in-process operations, asking for its reads on the first call only', async () => {
    rounds = [];
    const input = { key: 'a/rt', object: state.get(R.runtimes, 'a', 'rt'), state, now };
    assert.deepEqual(await transport.invoke(reader, input), await reader.handler(input));
    assert.deepEqual(rounds, [2], 'the object, then the Runtime get and the Pod list at once');
    const other = { key: 'b/rt', object: state.get(R.runtimes, 'b', 'rt'), state, now };
    assert.deepEqual(await transport.invoke(reader, other), await reader.handler(other));
    assert.deepEqual(rounds, [2, 1], 'the reads template of the last call answers a new key at once');
  });

  it('carries typed errors across the wire', async () => {
    await assert.rejects(
      transport.invoke(reader, { key: 'a/none', object: undefined, state, now }),
      (e: unknown) => e instanceof WaitingError && e.retryAfterMs === 1234 && e.reason === 'NoRuntime',
    );
    await assert.rejects(
      transport.invoke(reader, { key: 'b/worse', object: undefined, state, now }),
      (e: unknown) => e instanceof TerminalError && e.reason === 'Bad',
    );
  });

  it('fails closed: no endpoint, or a server certificate for another name, is a transient error', async () => {
    const none = new WebhookTransport({ endpoints: { pick: () => undefined }, agent, cfg });
    await assert.rejects(none.invoke(reader, { key: 'a/rt', object: undefined, state, now }), /no ready endpoint/);
    const wrongName = new WebhookTransport({
      endpoints: { pick: () => address },
      agent,
      cfg: { ...cfg, namespace: 'elsewhere' },
    });
    await assert.rejects(
      wrongName.invoke(reader, { key: 'a/rt', object: undefined, state, now }),
      /does not match|altnames/i,
    );
  });

  it('trusts a rotated CA bundle without a restart (the file changes, the next invocation uses it)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'krt-ca-'));
    const file = join(dir, 'ca-bundle.crt');
    const other = await createCa('other-ca', new Date(), 2);
    writeFileSync(file, other.cert);
    const reloads: unknown[] = [];
    const ca = new CaAgent(file, (err) => reloads.push(err ?? 'ok'), 20);
    try {
      const t = new WebhookTransport({ endpoints: { pick: () => address }, agent: () => ca.get(), cfg });
      const input = { key: 'a/rt', object: state.get(R.runtimes, 'a', 'rt'), state, now };
      await assert.rejects(t.invoke(reader, input), /certificate|self.signed|unable to verify/i);
      writeFileSync(file, `${other.cert}\n${serverCa}`);
      for (let i = 0; i < 500 && !reloads.length; i++) await new Promise((r) => setTimeout(r, 20));
      assert.deepEqual(reloads, ['ok']);
      assert.deepEqual(await t.invoke(reader, input), await reader.handler(input));
    } finally {
      ca.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('sees a CA bundle rotated right after it started, and reports a missing file once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'krt-ca-'));
    const file = join(dir, 'ca-bundle.crt');
    const first = await createCa('first-ca', new Date(), 2);
    const second = await createCa('second-ca', new Date(), 2);
    writeFileSync(file, first.cert);
    const reloads: unknown[] = [];
    const ca = new CaAgent(file, (err) => reloads.push(err ? 'error' : 'ok'), 20);
    try {
      const before = ca.get();
      writeFileSync(file, second.cert);
      for (let i = 0; i < 200 && !reloads.length; i++) await new Promise((r) => setTimeout(r, 20));
      assert.deepEqual(reloads, ['ok']);
      assert.notEqual(ca.get(), before);
      rmSync(file);
      for (let i = 0; i < 200 && reloads.length < 2; i++) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 200));
      assert.deepEqual(reloads, ['ok', 'error']);
    } finally {
      ca.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses malformed requests with a stable reason', async () => {
    const call = (body: unknown, path = `/${WIRE_API_VERSION}/reader`): Promise<{ code: number; reason: string }> =>
      new Promise<{ code: number; reason: string }>((resolve, reject) => {
        const req = https.request(
          `https://${address}${path}`,
          {
            method: 'POST',
            agent,
            servername: 'kruntimes-fn-reader.ns.svc',
            headers: { 'Content-Type': 'application/json' },
          },
          (res) => {
            let text = '';
            res.on('data', (c: Buffer) => (text += c.toString()));
            res.on('end', () =>
              resolve({ code: res.statusCode ?? 0, reason: (JSON.parse(text) as { reason: string }).reason }),
            );
          },
        );
        req.on('error', reject);
        req.end(typeof body === 'string' ? body : JSON.stringify(body));
      });
    assert.deepEqual(await call({ apiVersion: 'v1', kind: WIRE_KIND }), { code: 400, reason: 'BadRequest' });
    assert.deepEqual(await call('{not json'), { code: 400, reason: 'BadRequest' });
    const req = { uid: 'u', function: 'reader', key: 'a/rt', now: now.toISOString(), reads: [], object: null };
    assert.deepEqual(
      await call({ apiVersion: WIRE_API_VERSION, kind: WIRE_KIND, request: req }, `/${WIRE_API_VERSION}/nope`),
      {
        code: 404,
        reason: 'NotFound',
      },
    );
    assert.deepEqual(
      await call({ apiVersion: WIRE_API_VERSION, kind: WIRE_KIND, request: { ...req, function: 'other' } }),
      { code: 400, reason: 'BadRequest' },
    );
  });

  it('reads its configuration from the environment and refuses unknown transports', () => {
    const c = loadTransportConfig({ KRT_FUNCTION_TRANSPORTS: 'run-ttl=webhook, run-reaper=inprocess' }, 'x');
    assert.equal(c.default, 'inprocess');
    assert.deepEqual(c.perFunction, { 'run-ttl': 'webhook', 'run-reaper': 'inprocess' });
    assert.throws(() => loadTransportConfig({ KRT_FUNCTION_TRANSPORT: 'carrier-pigeon' }, 'x'), /must be one of/);
  });
});
