/**
 * The `lambda` transport (relay side): each round of a FunctionInvocation is one AWS Lambda
 * Invoke (RequestResponse) of the function's Lambda, whose container image runs `aws-lambda-ric`
 * with the same handler the webhook server runs (apiserver/fnlambda.ts). The mapping is
 * lib/fn/lambda.ts; this module is the HTTP client: SigV4-signed for the AWS API (credentials
 * from the default chain, e.g. IRSA's web identity token), unsigned for an explicit endpoint such
 * as the Runtime Interface Emulator. An execution environment serves one invocation at a time, so
 * invocations in flight per endpoint are bounded (`concurrency`); the rest wait their turn.
 */
import { createHash, createHmac, type BinaryLike } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { SignatureV4 } from '@smithy/signature-v4';
import { TransientError } from '../lib/fn/errors.ts';
import { lambdaName, lambdaRequest, lambdaResult, type LambdaHttpRequest } from '../lib/fn/lambda.ts';
import type { InvocationRequest, InvocationResponse } from '../lib/fn/wire.ts';
import { parseResponse, WireTransport, type SendRound } from './transport.ts';

export interface LambdaConfig {
  /** Invoke API endpoints (round robin by least in flight): the AWS regional endpoint, or emulators. */
  endpoints: string[];
  /** The Lambda function name; `{function}` is replaced by the watch function's name. */
  functionName: string;
  /** Sign with SigV4 (the AWS API); region for the signature. */
  sigv4: boolean;
  region: string;
  /** Invocations in flight per endpoint. */
  concurrency: number;
  timeoutMs: number;
}

const positive = (v: string | undefined, dflt: number, what: string): number => {
  const n = Number(v ?? dflt);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`${what} must be a positive integer, got ${v}`);
  return n;
};

/**
 * KRT_LAMBDA_ENDPOINT (comma-separated; default the regional AWS endpoint of AWS_REGION),
 * KRT_LAMBDA_FUNCTION_NAME (default kruntimes-{function}), KRT_LAMBDA_SIGV4 (default: true for
 * the AWS endpoint, false for an explicit one), KRT_LAMBDA_CONCURRENCY (default 1 for an explicit
 * endpoint, one execution environment; 32 for the AWS API), KRT_FUNCTION_TIMEOUT_MS.
 */
export function loadLambdaConfig(env: NodeJS.ProcessEnv): LambdaConfig {
  const region = env.AWS_REGION ?? env.AWS_DEFAULT_REGION ?? '';
  const explicit = (env.KRT_LAMBDA_ENDPOINT ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (!explicit.length && !region) throw new Error('the lambda transport needs KRT_LAMBDA_ENDPOINT or AWS_REGION');
  for (const e of explicit)
    if (!/^https?:\/\/[^/]+\/?$/.test(e))
      throw new Error(`KRT_LAMBDA_ENDPOINT: expected http(s)://host[:port], got ${e}`);
  const sigv4 = (env.KRT_LAMBDA_SIGV4 ?? (explicit.length ? 'false' : 'true')) === 'true';
  if (sigv4 && !region) throw new Error('KRT_LAMBDA_SIGV4 needs AWS_REGION');
  return {
    endpoints: explicit.length ? explicit : [`https://lambda.${region}.amazonaws.com`],
    functionName: env.KRT_LAMBDA_FUNCTION_NAME || 'kruntimes-{function}',
    sigv4,
    region,
    concurrency: positive(env.KRT_LAMBDA_CONCURRENCY, explicit.length ? 1 : 32, 'KRT_LAMBDA_CONCURRENCY'),
    timeoutMs: positive(env.KRT_FUNCTION_TIMEOUT_MS, 10_000, 'KRT_FUNCTION_TIMEOUT_MS'),
  };
}

/** Endpoints with a bound on invocations in flight each; a caller waits (FIFO) for a free slot. */
export class EndpointPool {
  private readonly inFlight: number[];
  private readonly waiting: ((i: number) => void)[] = [];

  constructor(
    readonly endpoints: string[],
    private readonly concurrency: number,
  ) {
    this.inFlight = endpoints.map(() => 0);
  }

  /** Runs `f` on the least busy endpoint with a free slot. */
  async with<T>(f: (endpoint: string) => Promise<T>): Promise<T> {
    const i = await this.acquire();
    try {
      return await f(this.endpoints[i]!);
    } finally {
      this.release(i);
    }
  }

  private acquire(): Promise<number> {
    let best = -1;
    for (let i = 0; i < this.inFlight.length; i++)
      if (this.inFlight[i]! < this.concurrency && (best < 0 || this.inFlight[i]! < this.inFlight[best]!)) best = i;
    if (best >= 0) {
      this.inFlight[best]!++;
      return Promise.resolve(best);
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private release(i: number): void {
    const next = this.waiting.shift();
    if (next) next(i);
    else this.inFlight[i]!--;
  }
}

/** SHA-256 (HMAC when given a secret) over node:crypto, the hash the SigV4 signer asks for. */
type Source = string | ArrayBuffer | ArrayBufferView;
const bytes = (d: Source): BinaryLike =>
  typeof d === 'string'
    ? d
    : d instanceof ArrayBuffer
      ? new Uint8Array(d)
      : new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
class Sha256 {
  private readonly h;
  constructor(secret?: Source) {
    this.h = secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(secret));
  }
  update(data: Source): void {
    this.h.update(bytes(data));
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(new Uint8Array(this.h.digest()));
  }
}

export type Signer = (r: LambdaHttpRequest) => Promise<LambdaHttpRequest>;

/** A SigV4 signer for the `lambda` service with the default credential chain (env, web identity, ...). */
export function sigv4Signer(region: string): Signer {
  let signer: Promise<SignatureV4> | undefined;
  const make = async (): Promise<SignatureV4> => {
    const { defaultProvider } = await import('@aws-sdk/credential-provider-node');
    return new SignatureV4({ service: 'lambda', region, credentials: defaultProvider(), sha256: Sha256 });
  };
  return async (r) => {
    signer ??= make();
    const u = new URL(r.url);
    const signed = await (
      await signer
    ).sign({
      method: r.method,
      protocol: u.protocol,
      hostname: u.hostname,
      ...(u.port ? { port: Number(u.port) } : {}),
      path: u.pathname,
      query: {},
      headers: { ...r.headers, host: u.host },
      body: r.body,
    });
    return { ...r, headers: signed.headers };
  };
}

/** Sends one Invoke request; resolves to the Invoke API's status, headers and body. */
function send(
  r: LambdaHttpRequest,
  timeoutMs: number,
  agents: { http: http.Agent; https: https.Agent },
): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  const secure = r.url.startsWith('https:');
  return new Promise((resolve, reject) => {
    const req = (secure ? https : http).request(
      r.url,
      {
        method: r.method,
        agent: secure ? agents.https : agents.http,
        headers: { ...r.headers, 'content-length': String(Buffer.byteLength(r.body)) },
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }),
        );
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(r.body);
  });
}

/** The lambda transport: the wire rounds of apiserver/transport.ts carried by the Lambda Invoke API. */
export class LambdaTransport extends WireTransport {
  private readonly agents = {
    http: new http.Agent({ keepAlive: true }),
    https: new https.Agent({ keepAlive: true }),
  };

  constructor(cfg: LambdaConfig, sign: Signer | undefined, onRounds?: (fn: string, rounds: number) => void) {
    const pool = new EndpointPool(cfg.endpoints, cfg.concurrency);
    const round: SendRound = (fn, req) => pool.with((endpoint) => this.round(cfg, sign, endpoint, fn.name, req));
    super('lambda', round, onRounds);
  }

  private async round(
    cfg: LambdaConfig,
    sign: Signer | undefined,
    endpoint: string,
    fn: string,
    req: InvocationRequest,
  ): Promise<InvocationResponse> {
    const unsigned = lambdaRequest(endpoint, lambdaName(cfg.functionName, fn), req);
    let res: { status: number; headers: http.IncomingHttpHeaders; text: string };
    try {
      res = await send(sign ? await sign(unsigned) : unsigned, cfg.timeoutMs, this.agents);
    } catch (err) {
      throw new TransientError(`function ${fn} at ${endpoint}: ${err instanceof Error ? err.message : String(err)}`);
    }
    return parseResponse(req, lambdaResult(fn, res.status, res.headers, res.text));
  }

  stop(): void {
    this.agents.http.destroy();
    this.agents.https.destroy();
  }
}
