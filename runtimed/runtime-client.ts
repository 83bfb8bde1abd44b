/** runtimed's client of the Runtime Server over the connections it dials in (keep-alive HTTP/1.1). */
import http, { type IncomingMessage } from 'node:http';
import { CallChannel, ChannelRefused, oneLine, type Channel } from './call-channel.ts';
import type { DialIn } from './dial-in.ts';
import { LAUNCH_MIN_LEASE_MS, mayLaunch } from './fence.ts';
import type { ExecRequest } from './runtime-server/command.ts';
import type { OutputRecord, Summary } from './runtime-server/executions.ts';
import { REGISTER_TIMEOUT_MS, type FunctionSpec, type InvokeResult } from './runtime-server/functions.ts';

/** The Runtime Server refused a function handler (422): a registration error, retried per the Run's policy. */
export class FunctionRegistrationError extends Error {
  readonly reason = 'FunctionRegistration';
}

/** Streams an execution's output records to `onRecord` until it ends; resolves with its final summary. */
export type Following = (onRecord: (r: OutputRecord) => void) => Promise<Summary>;

/** How long a finished execution waits to be forgotten when no execute request carries it. */
export const FORGET_DELAY_MS = 200;
/** Attempts to forget an execution while the Runtime Server does not answer (then it is left). */
const FORGET_ATTEMPTS = 50;

export class RuntimeClient {
  private readonly agent: http.Agent;
  /** Finished executions to forget (id → failed attempts), sent with the next execute (forgetLater). */
  private readonly toForget = new Map<string, number>();
  private forgetTimer?: NodeJS.Timeout;
  private flushing?: Promise<void>;
  /** Whether the Runtime Server starts and follows an execution in one request (from its last answer). */
  private followsInExecute = false;
  private readonly channels = new Map<string, Channel>();
  /** Channels being opened, so that concurrent openers (a call, the reopen after a worker ended) share one. */
  private readonly opening = new Map<string, Promise<Channel | undefined>>();
  /** When the execution lease this runtimed last renewed lapses (CLOCK_MONOTONIC ns), undefined before the first. */
  private leaseUntil?: bigint;
  /** `monotonicNs`: CLOCK_MONOTONIC in nanoseconds, the clock the Runtime Server's lease runs on too. */
  constructor(
    readonly channel: DialIn,
    private readonly monotonicNs: () => bigint = () => process.hrtime.bigint(),
  ) {
    this.agent = channel.agent();
  }

  private request(
    method: string,
    path: string,
    body?: unknown,
    timeoutMs = 10_000,
    untilHeaders = false,
  ): Promise<{ code: number; res: IncomingMessage }> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          host: 'runtime',
          path,
          method,
          agent: this.agent,
          headers: payload ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload) } : {},
        },
        (res) => {
          // A followed execution may be silent for longer than the timeout: it bounds the answer only.
          if (untilHeaders) req.setTimeout(0);
          resolve({ code: res.statusCode ?? 0, res });
        },
      );
      req.on('error', reject);
      req.setTimeout(timeoutMs, () => req.destroy(new Error(`runtime server ${method} ${path}: timed out`)));
      req.end(payload);
    });
  }

  private async json<T>(
    method: string,
    path: string,
    body?: unknown,
    timeoutMs?: number,
  ): Promise<{ code: number; body: T }> {
    const { code, res } = await this.request(method, path, body, timeoutMs);
    return { code, body: await readJson<T>(res) };
  }

  async health(): Promise<boolean> {
    try {
      return (await this.json<{ healthy?: boolean }>('GET', '/healthz')).body.healthy === true;
    } catch {
      return false;
    }
  }

  async execute(req: ExecRequest): Promise<Summary> {
    const r = await this.json<Summary & { message?: string }>('POST', '/v1/executions', req);
    if (r.code >= 300) throw new Error(r.body.message ?? `runtime server answered ${r.code}`);
    return r.body;
  }

  /**
   * Starts the execution (idempotent per id) and follows it in the same request; resolves once the
   * Runtime Server accepted it. The executions forgetLater queued go with it (forgotten first).
   * A Runtime Server that answers with a summary only (an older one) is followed separately.
   */
  async executeFollowing(req: ExecRequest): Promise<Following> {
    await this.flushing;
    const forget = this.followsInExecute ? this.takeForgets() : [];
    const body = forget.length ? { ...req, forget: forget.map(([id]) => id) } : req;
    let r: { code: number; res: IncomingMessage };
    try {
      r = await this.request('POST', '/v1/executions?follow=1', body, 10_000, true);
    } catch (err) {
      this.requeueForgets(forget);
      throw err;
    }
    const { code, res } = r;
    if (code >= 300) {
      const answer = await readJson<{ message?: string }>(res);
      throw new Error(answer.message ?? `runtime server answered ${code}`);
    }
    this.followsInExecute = res.headers['content-type'] === NDJSON;
    if (this.followsInExecute) return (onRecord) => readRecords(res, req.id, onRecord);
    this.requeueForgets(forget);
    await readJson(res);
    return (onRecord) => this.follow(req.id, 0, onRecord);
  }

  /**
   * Forgets a finished execution soon: with the next executeFollowing, or on its own after
   * FORGET_DELAY_MS (retried while the Runtime Server does not answer).
   */
  forgetLater(id: string): void {
    if (!this.toForget.has(id)) this.toForget.set(id, 0);
    this.armForgets();
  }

  private armForgets(): void {
    this.forgetTimer ??= setTimeout(() => this.flushForgets(), FORGET_DELAY_MS).unref();
  }

  private takeForgets(): [string, number][] {
    const taken = [...this.toForget];
    this.toForget.clear();
    return taken;
  }

  /** Forgets that were not delivered go again, each at most FORGET_ATTEMPTS times. */
  private requeueForgets(ids: [string, number][]): void {
    for (const [id, failed] of ids) if (failed + 1 < FORGET_ATTEMPTS) this.toForget.set(id, failed + 1);
    if (this.toForget.size) this.armForgets();
  }

  private flushForgets(): void {
    this.forgetTimer = undefined;
    const taken = this.takeForgets();
    if (!taken.length) return;
    const failed: [string, number][] = [];
    this.flushing = Promise.all(taken.map(([id, n]) => this.forget(id).catch(() => void failed.push([id, n])))).then(
      () => {
        this.flushing = undefined;
        this.requeueForgets(failed);
      },
    );
  }

  async get(id: string): Promise<Summary | undefined> {
    const r = await this.json<Summary>('GET', `/v1/executions/${encodeURIComponent(id)}`);
    return r.code === 404 ? undefined : r.body;
  }

  async list(): Promise<Summary[]> {
    return (await this.json<{ executions: Summary[] }>('GET', '/v1/executions')).body.executions;
  }

  async cancel(id: string): Promise<void> {
    await this.json('POST', `/v1/executions/${encodeURIComponent(id)}/cancel`);
  }

  /**
   * Renews the Runtime Server's execution lease (fencing; runtime-server/lease.ts) until
   * validForMs from now: the renewal carries that deadline, so the Runtime Server does not hold
   * the lease past it however late it processes the renewal.
   */
  async renewLease(validForMs: number): Promise<void> {
    const deadline = this.monotonicNs() + BigInt(Math.round(Math.max(0, validForMs) * 1e6));
    const r = await this.json<{ message?: string }>('POST', '/v1/lease', { validForMs, deadlineNs: String(deadline) });
    if (r.code >= 300) throw new Error(r.body.message ?? `runtime server answered ${r.code}`);
    // Counted from before the request: never later than the Runtime Server's own deadline.
    this.leaseUntil = deadline;
  }

  /** Resolves once this runtimed holds the execution lease with minMs or more left (at once before the first renewal). */
  async leaseHeld(minMs = LAUNCH_MIN_LEASE_MS, pollMs = 100): Promise<void> {
    const ms = (ns: bigint): number => Number(ns) / 1e6;
    const until = (): number | undefined => (this.leaseUntil === undefined ? undefined : ms(this.leaseUntil));
    while (!mayLaunch(until(), ms(this.monotonicNs()), minMs)) await new Promise((r) => setTimeout(r, pollMs));
  }

  /** Whether the execution lease lapsed as far as this runtimed renewed it (no call may start then). */
  fenced(now = this.monotonicNs()): boolean {
    return this.leaseUntil !== undefined && now >= this.leaseUntil;
  }

  /**
   * Registers a function handler (idempotent per id); FunctionRegistrationError when the handler
   * cannot be used. Then opens its call channel, so a worker that takes it is warm before the first
   * call. A bash worker that takes the channel is the one that sources the file (the registration
   * leaves that check to it: `channelFollows`), so a channel refused with 422 is a registration
   * error, and a channel that does not open fails the registration (the file was not checked); the
   * function is unregistered again in both cases, so that a retry registers it anew.
   */
  async registerFunction(spec: FunctionSpec): Promise<void> {
    const channelFollows = !this.fenced();
    const body = { ...spec, channelFollows };
    const r = await this.json<{ message?: string }>('POST', '/v1/functions', body, REGISTER_TIMEOUT_MS + 5000);
    if (r.code === 422) throw new FunctionRegistrationError(r.body.message ?? 'the handler cannot be registered');
    if (r.code >= 300) throw new Error(r.body.message ?? `runtime server answered ${r.code}`);
    if (!channelFollows) return;
    try {
      await this.channelOf(spec.id);
    } catch (err) {
      await this.unregisterFunction(spec.id).catch(() => undefined);
      if (err instanceof ChannelRefused && err.code === 422) throw new FunctionRegistrationError(err.message);
      throw err;
    }
  }

  /**
   * One call of a registered function; `payload` is JSON text (at most 1 MiB). No timeout: the
   * Run's bounds the call. It goes over the function's call channel (call-channel.ts), opened on
   * the first call and kept: one line each way, no HTTP request per call. The fence is checked
   * here first (runtimed's own view of the lease), then again by whoever answers the channel.
   */
  async invokeFunction(id: string, payload: string): Promise<InvokeResult> {
    if (this.fenced()) return { ok: false, reason: 'NotRegistered', error: 'fenced: the execution lease lapsed' };
    const ch = await this.channelOf(id);
    if (!ch) return { ok: false, reason: 'NotRegistered', error: `function ${id} not registered` };
    const r = await ch.call(oneLine(payload) || 'null');
    // A bash worker that ended with its call took its channel with it: open the next one (and so
    // start the next worker) now rather than on the next call, as the Runtime Server's pipes did.
    if (!ch.open && this.channels.get(id) === ch && !this.fenced()) this.channelOf(id).catch(() => undefined);
    return r;
  }

  /** Function `id`'s open call channel, or a new one; undefined when the function is not registered. */
  private async channelOf(id: string): Promise<Channel | undefined> {
    const ch = this.channels.get(id);
    if (ch?.open) return ch;
    let p = this.opening.get(id);
    if (!p) {
      p = this.openChannel(id).finally(() => this.opening.delete(id));
      this.opening.set(id, p);
    }
    const opened = await p;
    if (opened && this.channels.get(id) !== opened) {
      this.channels.get(id)?.close();
      this.channels.set(id, opened);
    }
    return opened;
  }

  /**
   * Opens function `id`'s call channel. A connection closed before its 101 (a python worker that
   * ended just as the Runtime Server handed it the channel) is opened once more: no call was sent
   * on it, and the Runtime Server has then seen the worker's end and answers the channel itself.
   * A bash worker's 101 comes once it has sourced the file: the registration's time bounds it.
   */
  private async openChannel(id: string): Promise<Channel | undefined> {
    const hooks = {
      stderr: () => this.functionStderr(id),
      kill: () => this.cancelFunctionCall(id),
    };
    const open = (): Promise<Channel | undefined> =>
      CallChannel.open(this.channel.createConnection, id, hooks, REGISTER_TIMEOUT_MS + 5000);
    try {
      return await open();
    } catch (err) {
      if ((err as { code?: string }).code !== 'ECONNRESET') throw err;
      return open();
    }
  }

  /** The tail of function `id`'s last call's stderr (a bash worker's call on its channel failed). */
  private async functionStderr(id: string): Promise<string> {
    const r = await this.json<{ stderr?: string }>('GET', `/v1/functions/${encodeURIComponent(id)}/stderr`);
    return typeof r.body.stderr === 'string' ? r.body.stderr : '';
  }

  /** Who answers the calls of function `id`'s open channel ('runtime-server', 'python-worker', 'bash-worker'), if one is open. */
  callServer(id: string): string | undefined {
    const ch = this.channels.get(id);
    return ch?.open ? ch.servedBy : undefined;
  }

  async cancelFunctionCall(id: string): Promise<void> {
    await this.json('POST', `/v1/functions/${encodeURIComponent(id)}/cancel`);
  }

  async unregisterFunction(id: string): Promise<void> {
    this.channels.get(id)?.close();
    this.channels.delete(id);
    await this.json('DELETE', `/v1/functions/${encodeURIComponent(id)}`);
  }

  async forget(id: string): Promise<void> {
    await this.json('DELETE', `/v1/executions/${encodeURIComponent(id)}`);
  }

  /** Streams output records from `from` until the execution ends; resolves with its final summary. */
  async follow(id: string, from: number, onRecord: (r: OutputRecord) => void): Promise<Summary> {
    const { code, res } = await this.request(
      'GET',
      `/v1/executions/${encodeURIComponent(id)}/records?from=${from}&follow=1`,
      undefined,
      0,
    );
    if (code === 404) throw Object.assign(new Error(`execution ${id} not found`), { notFound: true });
    return readRecords(res, id, onRecord);
  }

  close(): void {
    clearTimeout(this.forgetTimer);
    this.agent.destroy();
    for (const ch of this.channels.values()) ch.close();
    this.channels.clear();
  }
}

const NDJSON = 'application/x-ndjson';

async function readJson<T>(res: IncomingMessage): Promise<T> {
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as T;
}

/** Reads an NDJSON record stream to its end record; its summary. */
async function readRecords(res: IncomingMessage, id: string, onRecord: (r: OutputRecord) => void): Promise<Summary> {
  let buf = '';
  let end: Summary | undefined;
  for await (const chunk of res) {
    buf += (chunk as Buffer).toString('utf8');
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (!line) continue;
      const msg = JSON.parse(line) as OutputRecord | { end: Summary };
      if ('end' in msg) end = msg.end;
      else onRecord(msg);
    }
  }
  if (!end) throw new Error(`execution ${id}: output stream ended early`);
  return end;
}
