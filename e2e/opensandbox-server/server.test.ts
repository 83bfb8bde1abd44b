import assert from 'node:assert/strict';
import { createCa, issueServing } from '../../lib/tls/certs.ts';
import { OpenSandboxClient } from '../../lib/opensandbox/client.ts';
import { isOpenSandboxError } from '../../lib/opensandbox/errors.ts';
import { encodeMetadataFilter } from '../../lib/opensandbox/metadata.ts';
import { nodeTransport } from '../../lib/opensandbox/transport.ts';
import { startOpenSandboxServer, type OpenSandboxTestServer } from './server.ts';

const KEY = 'test-key-1';
const LOOPBACK = { insecureHosts: ['127.0.0.1'] };
const create = {
  image: { uri: 'python:3.11' },
  entrypoint: ['python', '-c', 'print(1)'],
  resourceLimits: { cpu: '500m', memory: '512Mi' },
  metadata: { team: 'a' },
};

async function call(
  srv: OpenSandboxTestServer,
  method: string,
  path: string,
  body?: unknown,
  key: string | null = KEY,
): Promise<{ status: number; body: unknown; headers: Headers }> {
  const res = await fetch(`${srv.url}/v1${path}`, {
    method,
    headers: {
      ...(key ? { 'OPEN-SANDBOX-API-KEY': key } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as unknown) : undefined, headers: res.headers };
}

describe('OpenSandbox test server', () => {
  let srv: OpenSandboxTestServer;
  beforeEach(async () => {
    srv = await startOpenSandboxServer({ apiKeys: [KEY], insecure: true, pools: { small: 1 } });
  });
  afterEach(async () => {
    assert.deepEqual(srv.responseViolations, [], 'every response matched the spec');
    await srv.close();
  });

  it('refuses plain HTTP unless local development is explicit', async () => {
    await assert.rejects(startOpenSandboxServer({ apiKeys: [KEY] }), /insecure: true/);
  });

  it('requires a current API key and supports rotation', async () => {
    assert.equal((await call(srv, 'GET', '/sandboxes', undefined, null)).status, 401);
    assert.equal((await call(srv, 'GET', '/sandboxes', undefined, 'wrong')).status, 401);
    assert.equal((await call(srv, 'GET', '/sandboxes')).status, 200);
    srv.setApiKeys(['test-key-2']);
    const old = await call(srv, 'GET', '/sandboxes');
    assert.equal(old.status, 401);
    assert.equal((old.body as { code: string }).code, 'AUTH::INVALID_API_KEY');
    assert.ok(!JSON.stringify(old.body).includes(KEY), 'the key is never echoed');
    assert.equal((await call(srv, 'GET', '/sandboxes', undefined, 'test-key-2')).status, 200);
  });

  it('validates requests against the spec and the semantic create rules', async () => {
    const short = await call(srv, 'POST', '/sandboxes', { ...create, timeout: 10 });
    assert.equal(short.status, 400);
    assert.match(srv.requestViolations.join('\n'), /timeout/);
    assert.equal((await call(srv, 'POST', '/sandboxes', { ...create, entrypoint: undefined })).status, 400);
    assert.equal(
      (await call(srv, 'POST', '/sandboxes', { ...create, metadata: { 'opensandbox.io/x': 'y' } })).status,
      400,
    );
    assert.equal(
      (await call(srv, 'POST', '/sandboxes', { ...create, unknownField: 1 })).status,
      202,
      'CreateSandboxRequest allows additional properties',
    );
    assert.equal((await call(srv, 'GET', '/sandboxes?bogus=1')).status, 400);
    assert.equal((await call(srv, 'GET', '/sandboxes?pageSize=0')).status, 400);
  });

  it('creates, gets, lists by metadata with pagination, and deletes', async () => {
    const a = await call(srv, 'POST', '/sandboxes', create);
    assert.equal(a.status, 202);
    assert.match(a.headers.get('location') ?? '', /\/v1\/sandboxes\//);
    const id = (a.body as { id: string }).id;
    await call(srv, 'POST', '/sandboxes', { ...create, metadata: { team: 'b', 'example.com/job-uid': 'u-1' } });
    await call(srv, 'POST', '/sandboxes', { ...create, metadata: { team: 'b' } });
    const got = await call(srv, 'GET', `/sandboxes/${id}`);
    assert.equal((got.body as { status: { state: string } }).status.state, 'Running');
    const q = encodeURIComponent(encodeMetadataFilter({ 'example.com/job-uid': 'u-1' }));
    const byTag = await call(srv, 'GET', `/sandboxes?metadata=${q}`);
    assert.equal((byTag.body as { items: unknown[] }).items.length, 1);
    const page1 = await call(srv, 'GET', `/sandboxes?metadata=${encodeURIComponent('team=b')}&pageSize=1`);
    assert.deepEqual((page1.body as { pagination: unknown }).pagination, {
      page: 1,
      pageSize: 1,
      totalItems: 2,
      totalPages: 2,
      hasNextPage: true,
    });
    assert.equal((await call(srv, 'DELETE', `/sandboxes/${id}`)).status, 204);
    const running = await call(srv, 'GET', '/sandboxes?state=Running');
    assert.equal((running.body as { items: unknown[] }).items.length, 2);
    assert.equal((await call(srv, 'GET', '/sandboxes/nope')).status, 404);
  });

  it('answers 429 with Retry-After when a pool is full and frees capacity when a sandbox ends', async () => {
    const pooled = { entrypoint: ['true'], extensions: { poolRef: 'small' } };
    const first = await call(srv, 'POST', '/sandboxes', pooled);
    assert.equal(first.status, 202);
    const full = await call(srv, 'POST', '/sandboxes', pooled);
    assert.equal(full.status, 429);
    assert.equal(full.headers.get('retry-after'), '1');
    assert.equal((full.body as { code: string }).code, 'KUBERNETES::POOL_CAPACITY_EXHAUSTED');
    assert.equal(
      (await call(srv, 'POST', '/sandboxes', { entrypoint: ['true'], extensions: { poolRef: 'nope' } })).status,
      400,
    );
    srv.finish((first.body as { id: string }).id, true);
    assert.equal((await call(srv, 'POST', '/sandboxes', pooled)).status, 202);
  });

  it('can crash after storing a create, before answering', async () => {
    srv.faults.crashAfterCreate = 1;
    await assert.rejects(call(srv, 'POST', '/sandboxes', create));
    assert.equal(srv.sandboxes.size, 1, 'the sandbox exists although the client saw no answer');
    assert.equal(srv.calls.at(-1)?.status, 0);
  });

  it('reports health down on /health and on every API call', async () => {
    srv.faults.healthDown = true;
    assert.equal((await fetch(`${srv.url}/health`)).status, 503);
    assert.equal((await call(srv, 'GET', '/sandboxes')).status, 500);
    srv.faults.healthDown = false;
    assert.equal((await fetch(`${srv.url}/health`)).status, 200);
  });

  it('can report itself unhealthy while its API still answers', async () => {
    srv.faults.unhealthy = true;
    assert.equal((await fetch(`${srv.url}/health`)).status, 503);
    assert.equal((await call(srv, 'GET', '/sandboxes')).status, 200);
    srv.faults.unhealthy = false;
    assert.equal((await fetch(`${srv.url}/health`)).status, 200);
  });

  it('expires sandboxes after their timeout with reason ttl_expiry', async () => {
    let now = new Date('2026-01-01T00:00:00Z');
    const s2 = await startOpenSandboxServer({ apiKeys: [KEY], insecure: true, now: () => now });
    try {
      const res = await call(s2, 'POST', '/sandboxes', { ...create, timeout: 60 });
      now = new Date('2026-01-01T00:01:01Z');
      const got = await call(s2, 'GET', `/sandboxes/${(res.body as { id: string }).id}`);
      assert.deepEqual((got.body as { status: { state: string; reason: string } }).status.state, 'Terminated');
      assert.equal((got.body as { status: { reason: string } }).status.reason, 'ttl_expiry');
      assert.deepEqual(s2.responseViolations, []);
    } finally {
      await s2.close();
    }
  });

  it('serves HTTPS with a provided certificate to a client trusting its CA', async () => {
    const now = new Date();
    const ca = await createCa('test-ca', now, 1);
    const cert = await issueServing(ca, '127.0.0.1', { dns: ['localhost'], ips: ['127.0.0.1'] }, now, 1);
    const s2 = await startOpenSandboxServer({ apiKeys: [KEY], tls: { cert: cert.cert, key: cert.key } });
    try {
      assert.match(s2.url, /^https:/);
      const client = new OpenSandboxClient({
        endpoint: s2.url,
        apiKey: KEY,
        transport: nodeTransport({ ca: ca.cert }),
      });
      const created = await client.create(create);
      assert.equal((await client.get(created.id))?.id, created.id);
      const untrusted = new OpenSandboxClient({ endpoint: s2.url, apiKey: KEY, transport: nodeTransport() });
      await assert.rejects(untrusted.listAll({}), (e: unknown) => isOpenSandboxError(e, 'network'));
      assert.deepEqual(s2.responseViolations, []);
    } finally {
      await s2.close();
    }
  });

  it('is reachable through the typed client over plain HTTP only with the loopback allowance', async () => {
    assert.throws(() => new OpenSandboxClient({ endpoint: srv.url, apiKey: KEY }), /https/);
    const client = new OpenSandboxClient({ endpoint: srv.url, apiKey: KEY, policy: LOOPBACK });
    assert.deepEqual(await client.listAll({}), []);
  });
});
