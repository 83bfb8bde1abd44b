/**
 * A small client of the Runtime Gateway for SDK use (issue 15): call a Ready function Run with a
 * Kubernetes bearer token. The endpoint (URL and CA bundle) comes from the Run's status.endpoint;
 * TLS is verified against that CA bundle. One call at a time per Run: a 429 means a call is in
 * flight (there is no queue and no automatic retry; retry yourself if the call is idempotent).
 */
import https from 'node:https';
import type { KubeClient } from '../kube/client.ts';
import type { KubeObject } from '../kube/types.ts';

export const INVOCATION_HEADER = 'x-kruntime-invocation-id';
/** Largest request and response body the gateway accepts. */
export const INVOKE_LIMIT = 1 << 20;

export interface InvokeEndpoint {
  url: string;
  /** base64 PEM CA bundle of the endpoint (status.endpoint.caBundle). */
  caBundle?: string;
}

export interface InvokeResult {
  output: unknown;
  invocationId: string;
}

/** A refused or failed call: the HTTP code, the Status reason (FunctionError, TooManyRequests, ...) and message. */
export class InvokeError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly invocationId?: string,
  ) {
    super(message);
  }
}

const agents = new Map<string, https.Agent>();
function agentFor(caBundle: string | undefined): https.Agent {
  const key = caBundle ?? '';
  let a = agents.get(key);
  if (!a) {
    a = new https.Agent({
      keepAlive: true,
      maxSockets: 16,
      ...(caBundle ? { ca: Buffer.from(caBundle, 'base64').toString('utf8') } : {}),
    });
    agents.set(key, a);
  }
  return a;
}

function failure(code: number, text: string, id: string | undefined): InvokeError {
  try {
    const s = JSON.parse(text) as { kind?: string; reason?: string; message?: string };
    if (s.kind === 'Status') return new InvokeError(code, s.reason ?? 'Error', s.message ?? text, id);
  } catch {
    /* not a Status */
  }
  return new InvokeError(code, 'Error', text.slice(0, 500), id);
}

/** One call: `payload` is sent as JSON; resolves with the function's JSON output. */
export function invokeEndpoint(
  ep: InvokeEndpoint,
  token: string,
  payload: unknown,
  opts: { signal?: AbortSignal } = {},
): Promise<InvokeResult> {
  const body = JSON.stringify(payload ?? null);
  if (Buffer.byteLength(body) > INVOKE_LIMIT)
    return Promise.reject(new InvokeError(413, 'RequestEntityTooLarge', `payload exceeds ${INVOKE_LIMIT} bytes`));
  return new Promise((resolve, reject) => {
    const req = https.request(
      ep.url,
      {
        method: 'POST',
        agent: agentFor(ep.caBundle),
        headers: {
          Authorization: `Bearer ${token}`,
          'Content-Type': 'application/json',
          'Content-Length': Buffer.byteLength(body),
        },
        ...(opts.signal ? { signal: opts.signal } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const id = res.headers[INVOCATION_HEADER] as string | undefined;
          if (res.statusCode !== 200) return reject(failure(res.statusCode ?? 0, text, id));
          try {
            resolve({ output: JSON.parse(text) as unknown, invocationId: id ?? '' });
          } catch {
            reject(new InvokeError(502, 'BadGateway', 'the gateway answered something that is not JSON', id));
          }
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

interface FunctionRun extends KubeObject {
  status?: { phase?: string; message?: string; endpoint?: InvokeEndpoint };
}

/** The endpoint of a function Run read through `client` (503-like InvokeError when it is not Ready). */
export async function endpointOf(client: KubeClient, namespace: string, name: string): Promise<InvokeEndpoint> {
  const run = await client.get<FunctionRun>(`/apis/kruntimes.io/v1alpha1/namespaces/${namespace}/runs/${name}`);
  const ep = run.status?.endpoint;
  if (run.status?.phase !== 'Ready' || !ep?.url)
    throw new InvokeError(
      503,
      'NotReady',
      `Run ${name} is ${run.status?.phase ?? 'Pending'}, not Ready${run.status?.message ? ` (${run.status.message})` : ''}`,
    );
  return ep;
}

/** Closes the keep-alive connections of every endpoint. */
export function closeInvokeAgents(): void {
  for (const a of agents.values()) a.destroy();
  agents.clear();
}
