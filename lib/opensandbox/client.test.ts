import assert from 'node:assert/strict';
import { OpenSandboxClient } from './client.ts';
import { apiUrl, checkEndpoint, policyFromEnv } from './endpoint.ts';
import { OpenSandboxError, parseRetryAfter } from './errors.ts';
import { decodeMetadataFilter, encodeMetadataFilter, metadataKeyProblem, metadataValueProblem } from './metadata.ts';
import type { HttpRequest, HttpResponse, Transport } from './transport.ts';

const KEY = 'k-123456789';

function fake(respond: (r: HttpRequest) => HttpResponse | Promise<HttpResponse>): {
  transport: Transport;
  seen: HttpRequest[];
} {
  const seen: HttpRequest[] = [];
  return {
    seen,
    transport: async (r) => {
      seen.push(r);
      return respond(r);
    },
  };
}
async function fails(p: Promise<unknown>): Promise<OpenSandboxError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof OpenSandboxError) return e;
    throw e;
  }
  throw new Error('expected an OpenSandboxError');
}
const json = (status: number, body: unknown, headers: Record<string, string> = {}): HttpResponse => ({
  status,
  headers: { 'content-type': 'application/json', ...headers },
  body: JSON.stringify(body),
});
const sandbox = (id: string): Record<string, unknown> => ({
  id,
  status: { state: 'Running' },
  createdAt: '2026-01-01T00:00:00Z',
  entrypoint: ['x'],
  metadata: {},
});

describe('opensandbox endpoint policy', () => {
  it('requires https without credentials, query or fragment', () => {
    assert.equal(checkEndpoint('https://os.example.internal').ok, true);
    assert.equal(checkEndpoint('https://os.example.internal/prefix/').ok, true);
    for (const bad of [
      'https://user:pw@os.example',
      'https://os.example?x=1',
      'https://os.example#f',
      'ftp://os.example',
      'not a url',
    ]) {
      assert.deepEqual([bad, checkEndpoint(bad).ok], [bad, false]);
    }
    const plain = checkEndpoint('http://127.0.0.1:8080');
    assert.deepEqual(plain.ok ? '' : plain.reason, 'InsecureEndpoint');
  });

  it('allows plain http only for hosts named in the explicit local-development allowance', () => {
    const dev = policyFromEnv(' 127.0.0.1, localhost ,');
    assert.deepEqual(dev, { insecureHosts: ['127.0.0.1', 'localhost'] });
    assert.equal(checkEndpoint('http://127.0.0.1:8080', dev).ok, true);
    assert.equal(checkEndpoint('http://10.0.0.1:8080', dev).ok, false);
    assert.equal(checkEndpoint('http://[::1]:8080', { insecureHosts: ['::1'] }).ok, true);
  });

  it('joins API paths under an endpoint with a path prefix', () => {
    assert.equal(
      apiUrl(new URL('https://h/prefix/'), '/v1/sandboxes', new URLSearchParams({ a: 'b' })),
      'https://h/prefix/v1/sandboxes?a=b',
    );
    assert.equal(apiUrl(new URL('https://h'), '/v1/sandboxes'), 'https://h/v1/sandboxes');
  });
});

describe('opensandbox metadata', () => {
  it('follows label rules and reserves opensandbox.io/', () => {
    assert.equal(metadataKeyProblem('execution.ayatori.ddupan.top/job-uid'), undefined);
    assert.match(metadataKeyProblem('opensandbox.io/x') ?? '', /reserved/);
    assert.match(metadataKeyProblem('Bad_Prefix/x') ?? '', /prefix/);
    assert.equal(metadataValueProblem('0f8c2b2e-1a7b-4a3e-9d55-1f2a3b4c5d6e'), undefined);
    assert.match(metadataValueProblem('x'.repeat(64)) ?? '', /63/);
  });

  it('round-trips the list filter encoding', () => {
    const m = { 'execution.ayatori.ddupan.top/job-uid': 'u-1', note: 'Demo Test&=' };
    assert.deepEqual(decodeMetadataFilter(encodeMetadataFilter(m)), m);
    assert.equal(decodeMetadataFilter('a=1&broken'), undefined);
    assert.deepEqual(decodeMetadataFilter(''), {});
  });
});

describe('opensandbox client', () => {
  it('sends the API key header and the encoded metadata filter, and follows pagination', async () => {
    let page = 0;
    const f = fake(() =>
      json(200, {
        items: [sandbox(`s${++page}`)],
        pagination: { page, pageSize: 1, totalItems: 2, totalPages: 2, hasNextPage: page < 2 },
      }),
    );
    const c = new OpenSandboxClient({ endpoint: 'https://os.example', apiKey: KEY, transport: f.transport });
    const all = await c.listAll({ metadata: { 'a.b/uid': 'u 1' }, states: ['Running', 'Paused'] });
    assert.deepEqual(
      all.map((s) => s.id),
      ['s1', 's2'],
    );
    const u = new URL(f.seen[0]!.url);
    assert.equal(u.pathname, '/v1/sandboxes');
    assert.deepEqual(u.searchParams.getAll('state'), ['Running', 'Paused']);
    assert.equal(u.searchParams.get('metadata'), 'a.b%2Fuid=u+1');
    assert.equal(f.seen[0]!.headers['OPEN-SANDBOX-API-KEY'], KEY);
    assert.equal(new URL(f.seen[1]!.url).searchParams.get('page'), '2');
  });

  it('classifies errors, reads Retry-After and never puts the key in messages', async () => {
    const c = (r: HttpResponse): OpenSandboxClient =>
      new OpenSandboxClient({
        endpoint: 'https://os.example',
        apiKey: KEY,
        transport: fake(() => r).transport,
        now: () => 0,
      });
    const e429 = await fails(
      c(json(429, { code: 'KUBERNETES::POOL_CAPACITY_EXHAUSTED', message: 'full' }, { 'retry-after': '7' })).create({
        entrypoint: ['x'],
      }),
    );
    assert.deepEqual(
      [e429.kind, e429.code, e429.retryAfterMs, e429.outcomeUnknown],
      ['rate-limited', 'KUBERNETES::POOL_CAPACITY_EXHAUSTED', 7000, false],
    );
    const e500 = await fails(c(json(500, { code: 'X', message: 'boom' })).create({ entrypoint: ['x'] }));
    assert.deepEqual([e500.kind, e500.outcomeUnknown], ['server', true], 'a failed create may have happened');
    const e401 = await fails(c(json(401, { code: 'AUTH', message: 'bad key' })).listAll({}));
    assert.equal(e401.kind, 'unauthorized');
    assert.ok(![e429, e500, e401].some((e) => e.message.includes(KEY)));
    assert.equal(await c(json(404, { code: 'NOT_FOUND', message: 'x' })).get('x'), undefined);
    assert.equal(await c(json(404, { code: 'NOT_FOUND', message: 'x' })).delete('x'), 'not-found');
    assert.equal(await c({ status: 204, headers: {}, body: '' }).delete('x'), 'deleted');
    const bad = await fails(c(json(200, { nope: true })).listAll({}));
    assert.equal(bad.kind, 'protocol');
  });

  it('marks network failures and timeouts of creates as outcome unknown', async () => {
    const down = new OpenSandboxClient({
      endpoint: 'https://os.example',
      apiKey: KEY,
      transport: () => Promise.reject(new Error('ECONNRESET')),
    });
    const e = await fails(down.create({ entrypoint: ['x'] }));
    assert.deepEqual([e.kind, e.outcomeUnknown], ['network', true]);
    const slow = new OpenSandboxClient({
      endpoint: 'https://os.example',
      apiKey: KEY,
      createTimeoutMs: 20,
      timeoutMs: 20,
      transport: (r) =>
        new Promise((_, reject) => r.signal.addEventListener('abort', () => reject(r.signal.reason as Error))),
    });
    const t = await fails(slow.create({ entrypoint: ['x'] }));
    assert.deepEqual([t.kind, t.outcomeUnknown], ['timeout', true]);
    const g = await fails(slow.get('x'));
    assert.equal(g.outcomeUnknown, false);
  });

  it('reads the server health report from /health without sending the API key', async () => {
    const c = (res: HttpResponse): { client: OpenSandboxClient; seen: HttpRequest[] } => {
      const f = fake(() => res);
      return {
        client: new OpenSandboxClient({ endpoint: 'https://os.example/prefix', apiKey: KEY, transport: f.transport }),
        seen: f.seen,
      };
    };
    const ok = c(json(200, { status: 'healthy' }));
    assert.deepEqual(await ok.client.health(), { healthy: true });
    assert.equal(ok.seen[0]?.url, 'https://os.example/prefix/health');
    assert.ok(!JSON.stringify(ok.seen[0]?.headers).includes(KEY));
    assert.deepEqual(await c(json(503, { status: 'unhealthy' })).client.health(), {
      healthy: false,
      message: 'GET /health: HTTP 503 unhealthy',
    });
    assert.deepEqual(await c(json(404, { detail: 'Not Found' })).client.health(), { healthy: 'unknown' });
    const down = new OpenSandboxClient({
      endpoint: 'https://os.example',
      apiKey: KEY,
      transport: () => Promise.reject(new Error('ECONNREFUSED')),
    });
    assert.equal((await fails(down.health())).kind, 'network');
  });

  it('refuses to be built for a non-https endpoint without the allowance', () => {
    assert.throws(() => new OpenSandboxClient({ endpoint: 'http://os.example', apiKey: KEY }), /https/);
  });

  it('parses Retry-After seconds and dates', () => {
    assert.equal(parseRetryAfter('3', 0), 3000);
    assert.equal(parseRetryAfter(new Date(5000).toUTCString(), 0), 5000);
    assert.equal(parseRetryAfter('soon', 0), undefined);
  });
});
