/** runtimed's client of the Runtime Server over the connections it dials in (keep-alive HTTP/1.1). */
import http, { type IncomingMessage } from 'node:http';
import type { DialIn } from './dial-in.ts';
import type { ExecRequest } from './runtime-server/command.ts';
import type { OutputRecord, Summary } from './runtime-server/executions.ts';

export class RuntimeClient {
  private readonly agent: http.Agent;
  constructor(readonly channel: DialIn) {
    this.agent = channel.agent();
  }

  private request(
    method: string,
    path: string,
    body?: unknown,
    timeoutMs = 10_000,
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
        (res) => resolve({ code: res.statusCode ?? 0, res }),
      );
      req.on('error', reject);
      req.setTimeout(timeoutMs, () => req.destroy(new Error(`runtime server ${method} ${path}: timed out`)));
      req.end(payload);
    });
  }

  private async json<T>(method: string, path: string, body?: unknown): Promise<{ code: number; body: T }> {
    const { code, res } = await this.request(method, path, body);
    const chunks: Buffer[] = [];
    for await (const c of res) chunks.push(c as Buffer);
    return { code, body: JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as T };
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

  /** Renews the Runtime Server's execution lease (fencing; runtime-server/lease.ts). */
  async renewLease(validForMs: number): Promise<void> {
    const r = await this.json<{ message?: string }>('POST', '/v1/lease', { validForMs });
    if (r.code >= 300) throw new Error(r.body.message ?? `runtime server answered ${r.code}`);
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

  close(): void {
    this.agent.destroy();
  }
}
