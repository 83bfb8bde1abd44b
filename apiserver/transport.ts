/**
 * How the relay invokes a watch function: `inprocess` calls the handler in this process (the
 * hot path); `webhook` POSTs a FunctionInvocation (lib/fn/wire.ts, docs/functions.md) over TLS
 * to the function's own Service, resolved through its ready Pods (round robin), and verifies the server's certificate against the kruntimes CA for the Service's DNS
 * name. Which transport a function uses is configuration (KRT_FUNCTION_TRANSPORT[S]).
 */
import { randomUUID } from 'node:crypto';
import https from 'node:https';
import type { KubeClient } from '../lib/kube/client.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { ListWatch } from '../lib/kube/watch.ts';
import { TransientError } from '../lib/fn/errors.ts';
import type { Operation, ReconcileInput, WatchFunction } from '../lib/fn/types.ts';
import { FollowedFiles } from '../lib/fs/followed-files.ts';
import {
  answerReads,
  decodeError,
  fillTemplate,
  MAX_ROUNDS,
  readId,
  templateOf,
  WIRE_API_VERSION,
  WIRE_KIND,
  type InvocationRequest,
  type InvocationResponse,
  type ReadAnswer,
  type ReadRef,
} from '../lib/fn/wire.ts';

export type TransportName = 'inprocess' | 'webhook' | 'lambda';

export interface Transport {
  readonly name: TransportName;
  invoke(fn: WatchFunction, input: ReconcileInput): Promise<Operation[]>;
  start?(): Promise<void>;
  stop?(): void;
}

export const inprocess: Transport = {
  name: 'inprocess',
  invoke: (fn, input) => Promise.resolve(fn.handler(input)),
};

export interface TransportConfig {
  /** The transport of functions not named in `perFunction`. */
  default: TransportName;
  perFunction: Record<string, TransportName>;
  /** Service name of a function's webhook; `{function}` is replaced by its name. */
  serviceTemplate: string;
  namespace: string;
  /** PEM CA bundle that signs the function servers' certificates. */
  caFile: string;
  timeoutMs: number;
}

const TRANSPORTS: TransportName[] = ['inprocess', 'webhook', 'lambda'];

function transportName(v: string, what: string): TransportName {
  if ((TRANSPORTS as string[]).includes(v)) return v as TransportName;
  throw new Error(`${what} must be one of ${TRANSPORTS.join(', ')}, got ${v}`);
}

/** KRT_FUNCTION_TRANSPORT (default for all), KRT_FUNCTION_TRANSPORTS (name=transport,...), KRT_FUNCTION_SERVICE. */
export function loadTransportConfig(env: NodeJS.ProcessEnv, namespace: string): TransportConfig {
  const perFunction: Record<string, TransportName> = {};
  for (const pair of (env.KRT_FUNCTION_TRANSPORTS ?? '').split(',').map((s) => s.trim())) {
    if (!pair) continue;
    const [name, t] = pair.split('=').map((s) => s.trim());
    if (!name || !t) throw new Error(`KRT_FUNCTION_TRANSPORTS: expected name=transport, got ${pair}`);
    perFunction[name] = transportName(t, `KRT_FUNCTION_TRANSPORTS ${name}`);
  }
  const timeout = Number(env.KRT_FUNCTION_TIMEOUT_MS ?? 10_000);
  if (!Number.isFinite(timeout) || timeout <= 0) throw new Error('KRT_FUNCTION_TIMEOUT_MS must be a positive number');
  return {
    default: transportName(env.KRT_FUNCTION_TRANSPORT || 'inprocess', 'KRT_FUNCTION_TRANSPORT'),
    perFunction,
    serviceTemplate: env.KRT_FUNCTION_SERVICE || 'kruntimes-fn-{function}',
    namespace,
    caFile: env.KRT_FUNCTION_CA ?? '/etc/kruntimes/tls/ca-bundle.crt',
    timeoutMs: timeout,
  };
}

export const transportOf = (cfg: TransportConfig, fn: string): TransportName => cfg.perFunction[fn] ?? cfg.default;
export const serviceOf = (cfg: TransportConfig, fn: string): string => cfg.serviceTemplate.replaceAll('{function}', fn);

interface PodObj extends KubeObject {
  spec?: { containers?: { ports?: { name?: string; containerPort?: number }[] }[] };
  status?: { podIP?: string; conditions?: { type: string; status: string }[] };
}

/** The label a function server Pod carries: the name of the Service it serves (a webhook Deployment's template sets it). */
export const FUNCTION_SERVICE_LABEL = 'kruntimes.io/function-service';

/**
 * Ready endpoints of the function Services of one namespace, from their Pods (one watch for all:
 * Pods labelled kruntimes.io/function-service=<service>). Pods rather than EndpointSlices: the
 * same in a cluster and in the local environment, whose loopback Pod IPs EndpointSlices refuse.
 */
export class Endpoints {
  private readonly lw: ListWatch<PodObj>;
  private next = 0;

  constructor(client: KubeClient, namespace: string, onError: (err: unknown) => void) {
    this.lw = new ListWatch<PodObj>(
      client,
      { path: `/api/v1/namespaces/${namespace}/pods`, labelSelector: FUNCTION_SERVICE_LABEL, onError },
      () => undefined,
    );
  }

  start(): Promise<void> {
    this.lw.start();
    return this.lw.synced;
  }

  stop(): void {
    this.lw.stop();
  }

  /** `ip:port` of a ready Pod of the Service that is not being deleted (round robin), or undefined. */
  pick(service: string): string | undefined {
    const ready: string[] = [];
    for (const p of this.lw.store.list()) {
      if (p.metadata.labels?.[FUNCTION_SERVICE_LABEL] !== service || p.metadata.deletionTimestamp) continue;
      const ip = p.status?.podIP;
      if (!ip || !p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) continue;
      const ports = (p.spec?.containers ?? []).flatMap((c) => c.ports ?? []);
      const port = ports.find((x) => x.name === 'https')?.containerPort;
      if (port) ready.push(ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`);
    }
    if (!ready.length) return undefined;
    this.next = (this.next + 1) % 1_000_000;
    return ready[this.next % ready.length];
  }
}

/**
 * The relay's HTTPS agent for the function servers, trusting the CA bundle in `caFile`; when the
 * file changes (the mounted Secret rotated) a new agent with the new bundle replaces it for the
 * next invocations, without a relay restart. A bundle that cannot be read keeps the old agent.
 */
export class CaAgent {
  private agent: https.Agent;
  private readonly file: FollowedFiles;

  constructor(
    caFile: string,
    private readonly onReload: (err?: unknown) => void = () => undefined,
    intervalMs = 2000,
  ) {
    this.file = new FollowedFiles([caFile], intervalMs, ([ca]) => this.reload(String(ca)), onReload);
    this.agent = CaAgent.make(String(this.file.contents[0]));
  }

  private static make(ca: string): https.Agent {
    return new https.Agent({ keepAlive: true, maxSockets: 64, ca });
  }

  private reload(ca: string): void {
    if (!ca.includes('BEGIN CERTIFICATE')) return;
    // In-flight requests finish on the old agent; its idle sockets are closed by the servers'
    // keep-alive timeout.
    this.agent = CaAgent.make(ca);
    this.onReload();
  }

  get(): https.Agent {
    return this.agent;
  }

  stop(): void {
    this.file.stop();
    this.agent.destroy();
  }
}

/** POSTs one FunctionInvocation and returns the response (TransientError on any transport failure). */
export function post(
  agent: https.Agent,
  target: { address: string; servername: string; path: string },
  body: InvocationRequest,
  timeoutMs: number,
): Promise<InvocationResponse> {
  const payload = JSON.stringify({ apiVersion: WIRE_API_VERSION, kind: WIRE_KIND, request: body });
  return new Promise((resolve, reject) => {
    const req = https.request(
      `https://${target.address}${target.path}`,
      {
        method: 'POST',
        agent,
        servername: target.servername,
        headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload) },
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', (err) => reject(new TransientError(`function ${body.function}: ${err.message}`)));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode !== 200)
            return reject(
              new TransientError(`function ${body.function}: HTTP ${res.statusCode}: ${text.slice(0, 200)}`),
            );
          try {
            resolve(parseResponse(body, text));
          } catch (err) {
            reject(err instanceof Error ? err : new TransientError(String(err)));
          }
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', (err) =>
      reject(new TransientError(`function ${body.function} at ${target.address}: ${err.message}`)),
    );
    req.end(payload);
  });
}

export function parseResponse(req: InvocationRequest, text: string): InvocationResponse {
  const env = JSON.parse(text) as { apiVersion?: string; kind?: string; response?: InvocationResponse };
  if (env.apiVersion !== WIRE_API_VERSION || env.kind !== WIRE_KIND || !env.response)
    throw new TransientError(`function ${req.function}: not a ${WIRE_API_VERSION} ${WIRE_KIND} response`);
  if (env.response.uid !== req.uid) throw new TransientError(`function ${req.function}: response uid mismatch`);
  return env.response;
}

/** Sends one round of an invocation and returns the function's answer (TransientError on any transport failure). */
export type SendRound = (fn: WatchFunction, req: InvocationRequest) => Promise<InvocationResponse>;

/**
 * An out-of-process transport over the FunctionInvocation wire format: one invocation may take
 * several rounds while the function asks for reads. `send` is the carrier (webhook, lambda).
 */
export class WireTransport implements Transport {
  private readonly templates = new Map<string, ReadRef[]>();

  constructor(
    readonly name: Exclude<TransportName, 'inprocess'>,
    private readonly send: SendRound,
    /** Rounds an invocation took (relay metrics). */
    private readonly onRounds?: (fn: string, rounds: number) => void,
  ) {}

  async invoke(fn: WatchFunction, input: ReconcileInput): Promise<Operation[]> {
    const template = this.templates.get(fn.name);
    const answered = new Map<string, ReadAnswer>();
    const answer = (refs: ReadRef[]): void => {
      for (const a of answerReads(input.state, refs)) answered.set(readId(a), a);
    };
    if (template) answer(fillTemplate(template, input.key));
    try {
      for (let round = 1; round <= MAX_ROUNDS; round++) {
        const res = await this.send(fn, requestOf(fn, input, [...answered.values()]));
        if (res.needs?.length) {
          answer(res.needs);
          continue;
        }
        if (res.error) throw decodeError(fn.name, res.error);
        this.onRounds?.(fn.name, round);
        return res.operations ?? [];
      }
    } finally {
      // What this invocation read is the best guess of what the next one reads (even a failed one).
      if (answered.size) this.templates.set(fn.name, templateOf([...answered.values()].map(refOnly), input.key));
    }
    throw new TransientError(`function ${fn.name}: still asking for reads after ${MAX_ROUNDS} rounds`);
  }
}

/** One round's request: a fresh uid, the key, the observed object, the reads answered so far and `now`. */
export function requestOf(fn: WatchFunction, input: ReconcileInput, reads: ReadAnswer[]): InvocationRequest {
  return {
    uid: randomUUID(),
    function: fn.name,
    trigger: { type: 'watch', resource: fn.trigger.resource },
    key: input.key,
    object: input.object ?? null,
    now: input.now.toISOString(),
    reads,
  };
}

/** The webhook transport: HTTPS POSTs to a ready Pod of the function's Service. */
export class WebhookTransport extends WireTransport {
  constructor(o: {
    endpoints: Pick<Endpoints, 'pick'>;
    /** The agent (or the current one of a CaAgent) trusting the function servers' CA. */
    agent: https.Agent | (() => https.Agent);
    cfg: TransportConfig;
    /** Rounds an invocation took (relay metrics). */
    onRounds?: (fn: string, rounds: number) => void;
  }) {
    const send: SendRound = (fn, req) => {
      const service = serviceOf(o.cfg, fn.name);
      const address = o.endpoints.pick(service);
      if (!address) throw new TransientError(`function ${fn.name}: no ready endpoint of Service ${service}`);
      const target = {
        address,
        servername: `${service}.${o.cfg.namespace}.svc`,
        path: `/${WIRE_API_VERSION}/${fn.name}`,
      };
      return post(typeof o.agent === 'function' ? o.agent() : o.agent, target, req, o.cfg.timeoutMs);
    };
    super('webhook', send, o.onRounds);
  }
}

function refOnly(a: ReadAnswer): ReadRef {
  const { object: _o, items: _i, ...ref } = a;
  return ref;
}
