import assert from 'node:assert/strict';
import http from 'node:http';
import { pino } from 'pino';
import { TransientError, WaitingError } from '../lib/fn/errors.ts';
import { FakeState } from '../lib/fn/fake-state.ts';
import { lambdaName, lambdaRequest, lambdaResult } from '../lib/fn/lambda.ts';
import { R } from '../lib/fn/resources.ts';
import { WIRE_API_VERSION, WIRE_KIND, type InvocationRequest } from '../lib/fn/wire.ts';
import { BadRequest, lambdaHandler, servedFunctions } from './fnlambda.ts';
import { EndpointPool, LambdaTransport, loadLambdaConfig, sigv4Signer, type LambdaConfig } from './lambda.ts';
import { obj, reader } from './transport-fixtures.ts';

const log = pino({ level: 'silent' });

const now = new Date('2026-01-02T03:04:05.000Z');
const wireReq = (over: Partial<InvocationRequest> = {}): InvocationRequest => ({
  uid: 'u-1',
  function: 'reader',
  trigger: { type: 'watch', resource: R.runtimes },
  key: 'a/rt',
  object: null,
  now: now.toISOString(),
  reads: [],
  ...over,
});

describe('lambda transport: wire mapping onto the Lambda Invoke API', () => {
  it('POSTs the FunctionInvocation envelope to /2015-03-31/functions/<name>/invocations, RequestResponse', () => {
    const r = lambdaRequest('http://127.0.0.1:9000/', lambdaName('kruntimes-{function}', 'run-scheduler'), wireReq());
    assert.equal(r.url, 'http://127.0.0.1:9000/2015-03-31/functions/kruntimes-run-scheduler/invocations');
    assert.equal(r.headers['x-amz-invocation-type'], 'RequestResponse');
    assert.deepEqual(JSON.parse(r.body), { apiVersion: WIRE_API_VERSION, kind: WIRE_KIND, request: wireReq() });
    assert.match(lambdaRequest('https://x', 'a:b/c', wireReq()).url, /functions\/a%3Ab%2Fc\/invocations$/);
  });

  it('answers the body of a clean 200; a function error, a throttle or a busy emulator is transient', () => {
    assert.equal(lambdaResult('f', 200, {}, '{"apiVersion":"x"}'), '{"apiVersion":"x"}');
    const transient = (s: number, h: Record<string, string>, body: string, re: RegExp): void =>
      assert.throws(
        () => lambdaResult('f', s, h, body),
        (e: unknown) => e instanceof TransientError && re.test(e.message),
      );
    // The AWS API marks the function's error; the emulator answers the runtime's error document bare.
    transient(
      200,
      { 'x-amz-function-error': 'Unhandled' },
      '{"errorType":"BadRequest","errorMessage":"no"}',
      /BadRequest: no/,
    );
    transient(200, {}, '{"errorType":"Runtime.ImportModuleError","errorMessage":"gone"}', /ImportModuleError: gone/);
    transient(429, { 'x-amzn-errortype': 'TooManyRequestsException' }, '{}', /HTTP 429 TooManyRequestsException/);
    transient(400, {}, '', /HTTP 400/);
  });

  it('reads its configuration: an explicit endpoint is unsigned and serial, the AWS API signed', () => {
    const rie = loadLambdaConfig({ KRT_LAMBDA_ENDPOINT: 'http://127.0.0.1:1,http://127.0.0.1:2' });
    assert.deepEqual(rie.endpoints, ['http://127.0.0.1:1', 'http://127.0.0.1:2']);
    assert.equal(rie.sigv4, false);
    assert.equal(rie.concurrency, 1);
    assert.equal(rie.functionName, 'kruntimes-{function}');
    const aws = loadLambdaConfig({ AWS_REGION: 'eu-west-1' });
    assert.deepEqual(aws.endpoints, ['https://lambda.eu-west-1.amazonaws.com']);
    assert.equal(aws.sigv4, true);
    assert.throws(() => loadLambdaConfig({}), /KRT_LAMBDA_ENDPOINT or AWS_REGION/);
    assert.throws(() => loadLambdaConfig({ KRT_LAMBDA_ENDPOINT: 'ftp://x' }), /expected http/);
    assert.throws(() => loadLambdaConfig({ KRT_LAMBDA_ENDPOINT: 'http://x', KRT_LAMBDA_SIGV4: 'true' }), /AWS_REGION/);
    assert.throws(() => loadLambdaConfig({ KRT_LAMBDA_ENDPOINT: 'http://x', KRT_LAMBDA_CONCURRENCY: '0' }), /positive/);
  });

  it('signs with SigV4 for the lambda service in the region, from the default credential chain', async () => {
    const saved = { ...process.env };
    Object.assign(process.env, { AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE', AWS_SECRET_ACCESS_KEY: 'secret' });
    try {
      const r = lambdaRequest('https://lambda.eu-west-1.amazonaws.com', 'kruntimes-reader', wireReq());
      const signed = await sigv4Signer('eu-west-1')(r);
      assert.match(
        signed.headers.authorization ?? '',
        /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/\d{8}\/eu-west-1\/lambda\/aws4_request, SignedHeaders=[^,]*host[^,]*, Signature=[0-9a-f]{64}$/,
      );
      assert.match(signed.headers['x-amz-date'] ?? '', /^\d{8}T\d{6}Z$/);
      assert.equal(signed.body, r.body);
    } finally {
      process.env = saved;
    }
  });
});

describe('lambda transport: the function side (the handler aws-lambda-ric runs)', () => {
  const state = new FakeState([
    [R.runtimes, obj('rt', 'a')],
    [R.pods, obj('p1', 'a', { runtime: 'rt' })],
  ]);
  const handler = lambdaHandler([reader], log);

  it('answers a FunctionInvocation like the webhook server, asking for the reads it was not sent', async () => {
    const res = await handler({ apiVersion: WIRE_API_VERSION, kind: WIRE_KIND, request: wireReq() });
    assert.equal(res.kind, WIRE_KIND);
    assert.equal(res.response.uid, 'u-1');
    assert.deepEqual(
      res.response.needs?.map((n) => ('list' in n ? `list ${n.resource.resource}` : `get ${n.resource.resource}`)),
      ['get runtimes', 'list pods'],
    );
  });

  it('refuses a malformed event or a function it does not serve with a BadRequest error', async () => {
    await assert.rejects(
      handler({ hello: 1 }),
      (e: unknown) => e instanceof BadRequest && /no function/.test(e.message),
    );
    await assert.rejects(
      handler({ apiVersion: 'v1', kind: WIRE_KIND, request: wireReq() }),
      (e: unknown) => e instanceof BadRequest && /expected apiVersion/.test(e.message),
    );
    await assert.rejects(
      handler({ apiVersion: WIRE_API_VERSION, kind: WIRE_KIND, request: wireReq({ now: 'yesterday' }) }),
      BadRequest,
    );
    assert.throws(() => servedFunctions([reader], { KRT_FUNCTIONS: 'reader,nope' }), /no watch function nope/);
    assert.deepEqual(servedFunctions([reader], {}), [reader]);
  });

  describe('relay to handler over HTTP, the Invoke API shape (one invocation at a time, like an emulator)', () => {
    let server: http.Server;
    let cfg: LambdaConfig;
    let inFlight = 0;
    let maxInFlight = 0;
    const paths: string[] = [];

    before(async () => {
      server = http.createServer((req, res) => {
        let body = '';
        req.on('data', (c: Buffer) => (body += c.toString()));
        req.on('end', () => {
          paths.push(req.url ?? '');
          maxInFlight = Math.max(maxInFlight, ++inFlight);
          void handler(JSON.parse(body)).then(
            (out) => setTimeout(() => (inFlight--, res.end(JSON.stringify(out))), 5),
            (err: Error) => (inFlight--, res.end(JSON.stringify({ errorType: err.name, errorMessage: err.message }))),
          );
        });
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const port = (server.address() as { port: number }).port;
      cfg = loadLambdaConfig({ KRT_LAMBDA_ENDPOINT: `http://127.0.0.1:${port}`, KRT_LAMBDA_FUNCTION_NAME: 'function' });
    });
    after(() => server.close());

    it('returns exactly the in-process operations and typed errors, never two invocations at once', async () => {
      const rounds: number[] = [];
      const t = new LambdaTransport(cfg, undefined, (_f, n) => rounds.push(n));
      try {
        const input = { key: 'a/rt', object: state.get(R.runtimes, 'a', 'rt'), state, now };
        const all = await Promise.all([1, 2, 3].map(() => t.invoke(reader, input)));
        for (const ops of all) assert.deepEqual(ops, await reader.handler(input));
        assert.equal(maxInFlight, 1, 'concurrency 1 per endpoint: an execution environment takes one at a time');
        assert.ok(paths.every((p) => p === '/2015-03-31/functions/function/invocations'));
        await assert.rejects(
          t.invoke(reader, { key: 'a/none', object: undefined, state, now }),
          (e: unknown) => e instanceof WaitingError && e.retryAfterMs === 1234,
        );
        assert.ok(rounds.length >= 3);
      } finally {
        t.stop();
      }
    });

    it('fails closed: an unreachable endpoint is a transient error', async () => {
      const t = new LambdaTransport({ ...cfg, endpoints: ['http://127.0.0.1:1'] }, undefined);
      await assert.rejects(t.invoke(reader, { key: 'a/rt', object: undefined, state, now }), TransientError);
      t.stop();
    });
  });
});

describe('EndpointPool', () => {
  it('bounds invocations in flight per endpoint, spreads them, and serves waiters in order', async () => {
    const pool = new EndpointPool(['a', 'b'], 1);
    const seen: string[] = [];
    const releases: (() => void)[] = [];
    const done = [1, 2, 3, 4].map((i) =>
      pool.with(
        (e) =>
          new Promise<void>((r) => {
            seen.push(`${i}@${e}`);
            releases.push(r);
          }),
      ),
    );
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(seen, ['1@a', '2@b'], 'one in flight per endpoint, the others wait');
    releases[1]!();
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(seen, ['1@a', '2@b', '3@b'], 'the first waiter takes the freed slot');
    releases[0]!();
    releases[2]!();
    await new Promise((r) => setImmediate(r));
    releases[3]!();
    await Promise.all(done);
    assert.equal(seen.length, 4);
  });
});
