/**
 * The Runtime Server of a Runtime Pod's `runtime` container (bash or python toolchain). It
 * listens on a Unix socket in the shared /workspace volume; runtimed is its only client.
 *   POST   /v1/executions                  start (idempotent per id); with ?follow=1 the answer is the
 *                                          execution's NDJSON records, then {"end":summary} (one request
 *                                          per Run); body.forget: ids to forget first (finished Runs)
 *   GET    /v1/executions                  list
 *   GET    /v1/executions/:id              summary
 *   GET    /v1/executions/:id/records?from=N&follow=1   NDJSON records, then {"end":summary}
 *   POST   /v1/executions/:id/cancel       cancel
 *   DELETE /v1/executions/:id              forget (409 while running)
 *   POST   /v1/functions                   register a function handler (idempotent per id; 422 when unusable)
 *   POST   /v1/functions/:id/invoke        one call: JSON payload in, {ok, output | reason, error} out
 *   GET    /v1/functions/:id/calls         Upgrade: kruntimes-function-calls; then one line per call
 *                                          each way (function-calls.ts), the invoke hot path; a python
 *                                          function's channel is handed to its worker (python-worker.ts)
 *                                          or (bash-channel.ts) is the stdin and stdout of a bash worker
 *   GET    /v1/functions/:id/stderr        {stderr}: the tail of a bash function's last call's stderr
 *   POST   /v1/functions/:id/cancel        kill the in-flight call
 *   DELETE /v1/functions/:id               unregister (kills an in-flight call)
 *   POST   /v1/lease                       {"validForMs": n, "deadlineNs": "<CLOCK_MONOTONIC ns>"}: renew the
 *                                          execution lease, never past the deadline runtimed sent (lease.ts)
 *   GET    /v1/sessions                    WebSocket: one interactive operation (sessions.ts)
 *   GET    /healthz
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { dialOut, type DialOut } from './dial-out.ts';
import type { ExecRequest, Language } from './command.ts';
import { Executions, type Execution, type OutputRecord, type Summary } from './executions.ts';
import { SessionOperations } from './sessions.ts';
import { ExecutionLease, parseRenewal } from './lease.ts';
import { CALLS_UPGRADE, callsPathId, serveCallChannel } from './function-calls.ts';
import { FUNCTION_IO_LIMIT, Functions, RegistrationError, type FunctionSpec } from './functions.ts';
import { refuseUpgrade } from '../../lib/http/upgrade-refusal.ts';

function json(res: ServerResponse, code: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

function readBody(req: IncomingMessage): Promise<unknown> {
  return readRaw(req, 4 << 20).then((text) => JSON.parse(text || '{}') as unknown);
}

function readRaw(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        reject(new Error('request too large'));
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function streamRecords(res: ServerResponse, e: Execution, from: number, follow: boolean, code = 200): void {
  res.writeHead(code, { 'Content-Type': 'application/x-ndjson' });
  const write = (r: OutputRecord): void => {
    if (r.seq >= from) res.write(`${JSON.stringify(r)}\n`);
  };
  for (const r of e.records) write(r);
  if (!follow || e.state !== 'RUNNING') {
    res.end(`${JSON.stringify({ end: e.summary() })}\n`);
    return;
  }
  // The headers go now: runtimed's execute-and-follow request is answered once the execution
  // started, not with its first output line (a silent Run may have none for a long time).
  res.flushHeaders();
  const onRecord = (r: OutputRecord): void => write(r);
  const onEnd = (s: Summary): void => {
    cleanup();
    res.end(`${JSON.stringify({ end: s })}\n`);
  };
  const cleanup = (): void => {
    e.off('record', onRecord);
    e.off('end', onEnd);
  };
  e.on('record', onRecord);
  e.once('end', onEnd);
  res.on('close', cleanup);
}

/** Forgets the finished executions runtimed listed (a running one is kept, an unknown one ignored). */
function forgetListed(ex: Executions, ids: unknown): void {
  if (!Array.isArray(ids)) return;
  for (const id of ids) if (typeof id === 'string') ex.forget(id);
}

async function collection(
  req: IncomingMessage,
  res: ServerResponse,
  ex: Executions,
  lease: ExecutionLease,
  follow: boolean,
): Promise<void> {
  if (req.method === 'GET') return json(res, 200, { executions: ex.list() });
  if (req.method !== 'POST') return json(res, 405, { message: 'method not allowed' });
  const { forget, ...body } = (await readBody(req)) as ExecRequest & { forget?: unknown };
  forgetListed(ex, forget);
  if (lease.expired())
    return json(res, 503, { message: 'fenced: the execution lease lapsed; runtimed must renew it first' });
  if (!body.id || !body.workingDir) return json(res, 400, { message: 'id and workingDir are required' });
  const { execution, created } = ex.execute(body);
  if (follow) return streamRecords(res, execution, 0, true, created ? 201 : 200);
  return json(res, created ? 201 : 200, execution.summary());
}

async function renewLease(
  req: IncomingMessage,
  res: ServerResponse,
  lease: ExecutionLease,
  fns: Functions,
): Promise<void> {
  if (req.method !== 'POST') return json(res, 405, { message: 'method not allowed' });
  const renewal = parseRenewal((await readBody(req)) as { validForMs?: unknown; deadlineNs?: unknown });
  if (typeof renewal === 'string') return json(res, 400, { message: renewal });
  lease.renew(renewal.validForMs, renewal.deadlineMs);
  fns.leaseRenewed();
  return json(res, 200, { remainingMs: lease.remainingMs() });
}

async function registerFunction(
  res: ServerResponse,
  fns: Functions,
  body: FunctionSpec & { channelFollows?: unknown },
): Promise<void> {
  const { channelFollows, ...spec } = body;
  if (!spec.id || !spec.workingDir || !spec.handler)
    return json(res, 400, { message: 'id, handler and workingDir are required' });
  try {
    const { created } = await fns.register(spec, { channelFollows: channelFollows === true });
    return json(res, created ? 201 : 200, { id: spec.id });
  } catch (err) {
    if (err instanceof RegistrationError) return json(res, 422, { message: err.message });
    throw err;
  }
}

async function functionRoute(
  req: IncomingMessage,
  res: ServerResponse,
  fns: Functions,
  lease: ExecutionLease,
  parts: string[],
): Promise<void> {
  const id = parts[2] ? decodeURIComponent(parts[2]) : undefined;
  if (lease.expired() && req.method === 'POST' && parts[3] !== 'cancel')
    return json(res, 503, { message: 'fenced: the execution lease lapsed; runtimed must renew it first' });
  if (!id) {
    if (req.method !== 'POST') return json(res, 405, { message: 'method not allowed' });
    return registerFunction(res, fns, (await readBody(req)) as FunctionSpec);
  }
  const f = fns.get(id);
  if (req.method === 'DELETE') return json(res, 200, { unregistered: fns.unregister(id) });
  if (!f) return json(res, 404, { message: `function ${id} not registered` });
  if (req.method === 'POST' && parts[3] === 'cancel') {
    f.cancel();
    return json(res, 200, {});
  }
  if (req.method === 'GET' && parts[3] === 'stderr') return json(res, 200, { stderr: await f.lastStderr() });
  if (req.method !== 'POST' || parts[3] !== 'invoke') return json(res, 405, { message: 'method not allowed' });
  const payload = await readRaw(req, FUNCTION_IO_LIMIT);
  return json(res, 200, await f.invoke(payload || 'null'));
}

async function route(
  req: IncomingMessage,
  res: ServerResponse,
  ex: Executions,
  lease: ExecutionLease,
  fns: Functions,
): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://runtime');
  const parts = url.pathname.split('/').filter(Boolean);
  if (url.pathname === '/healthz') return json(res, 200, { healthy: true });
  if (url.pathname === '/v1/lease') return renewLease(req, res, lease, fns);
  if (parts[0] === 'v1' && parts[1] === 'functions') return functionRoute(req, res, fns, lease, parts);
  if (parts[0] !== 'v1' || parts[1] !== 'executions') return json(res, 404, { message: 'not found' });
  const id = parts[2] ? decodeURIComponent(parts[2]) : undefined;
  if (!id) return collection(req, res, ex, lease, url.searchParams.get('follow') === '1');
  const e = ex.get(id);
  if (!e) return json(res, 404, { message: `execution ${id} not found` });
  if (req.method === 'GET' && parts[3] === 'records')
    return streamRecords(res, e, Number(url.searchParams.get('from') ?? 0), url.searchParams.get('follow') === '1');
  if (req.method === 'GET') return json(res, 200, e.summary());
  if (req.method === 'POST' && parts[3] === 'cancel') {
    e.kill('cancelled');
    return json(res, 200, e.summary());
  }
  if (req.method === 'DELETE') {
    const r = ex.forget(id);
    return json(res, r === 'running' ? 409 : 200, { result: r });
  }
  return json(res, 405, { message: 'method not allowed' });
}

/** Pure: a deadline `remainingMs` from now on CLOCK_MONOTONIC (process.hrtime, as Python's time.monotonic_ns). */
export function leaseDeadlineNs(remainingMs: number | undefined, nowNs = process.hrtime.bigint()): bigint | undefined {
  return remainingMs === undefined ? undefined : nowNs + BigInt(Math.round(remainingMs * 1e6));
}

/** A running Runtime Server and its channel to runtimed. */
export interface RuntimeServer {
  server: Server;
  channel: DialOut;
  executions: Executions;
  functions: Functions;
  close: () => void;
}

/**
 * Starts the Runtime Server, dialling runtimed's socket (runtimed listens in a directory the
 * runtime container mounts read-only; see runtimed/dial-in.ts).
 */
export function startRuntimeServer(
  socketPath: string,
  lang: Language,
  baseEnv: NodeJS.ProcessEnv,
  onGone?: () => void,
): RuntimeServer {
  // The runtime container and runtimed run as different uids sharing the Pod's fsGroup: files
  // are group-writable so runtimed can read and clean up.
  process.umask(0o002);
  const ex = new Executions(lang, baseEnv);
  const fns = new Functions(lang, baseEnv, {
    leaseDeadline: () => leaseDeadlineNs(lease.remainingMs()),
    leaseRemainingMs: () => lease.remainingMs(),
  });
  // Session operations are fenced with the executions (issue 11 c): none runs past the lease.
  const sessions = new SessionOperations(lang, baseEnv, () => lease.expired());
  const lease = new ExecutionLease(() => {
    const killed = [...ex.fence(), ...fns.fence()];
    const operations = sessions.fence();
    if (killed.length || operations)
      process.stderr.write(
        `${JSON.stringify({ level: 40, component: 'runtime-server', killed, sessionOperations: operations, msg: 'execution lease lapsed: executions and session operations fenced' })}\n`,
      );
  });
  const srv = createServer((req, res) => {
    route(req, res, ex, lease, fns).catch((err: unknown) =>
      json(res, 400, { message: err instanceof Error ? err.message : String(err) }),
    );
  });
  srv.on('upgrade', (req, socket, head) => {
    const pathname = new URL(req.url ?? '/', 'http://runtime').pathname;
    const fnId = callsPathId(pathname);
    if (pathname === '/v1/sessions') sessions.handleUpgrade(req, socket, head);
    else if (fnId && req.headers.upgrade === CALLS_UPGRADE) {
      // A registered, unfenced function whose worker takes the channel answers runtimed itself
      // (python, bash); otherwise this process serves it, checking fence and registration per call.
      const serve = (): void => serveCallChannel(socket, head, fnId, fns, () => lease.expired());
      if (!lease.expired() && fns.get(fnId)?.handOff(socket, head, serve)) return;
      serve();
    } else refuseUpgrade(socket, 404, 'NotFound', `no upgrade at ${pathname}`);
  });
  // Connections come from runtimed's socket only, and may wait idle until runtimed uses them.
  srv.headersTimeout = 0;
  srv.requestTimeout = 0;
  const channel = dialOut(socketPath, srv, onGone ? { onGone } : {});
  return {
    server: srv,
    channel,
    executions: ex,
    functions: fns,
    close: () => {
      channel.close();
      srv.close();
      // As when a container's init process exits on a kubelet: no execution, function worker or
      // session operation (each in its own process group) outlives the Runtime Server. Its
      // executions end 'shutdown', not 'fenced': the lease did not lapse, the container stops
      // (runtimed leaves such a Run to the Pod's fate when it stops too; see runner.ts).
      ex.fence('shutdown');
      fns.fence();
      sessions.fence();
    },
  };
}
