/**
 * Server-Sent Events bridges: a Kubernetes list+watch (the project's ListWatch, with the user's
 * client) pushed as one snapshot then deltas, and a Run's log follow over logs.kruntimes.io
 * resumed with the last cursor after a dropped upstream connection. No polling: every update
 * is a watch event or a log record.
 */
import type { Request, Response } from 'express';
import type { KubeClient } from '../../lib/kube/client.ts';
import { isApiError } from '../../lib/kube/errors.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { ListWatch } from '../../lib/kube/watch.ts';
import { waitingToStart } from '../runs/logs.ts';

const KEEPALIVE_MS = 20_000;

/** Starts an event stream on `res`; returns a sender and a way to learn the client left. */
export function openStream(
  req: Request,
  res: Response,
): { send: (event: string, data: unknown, id?: string) => void; closed: AbortSignal } {
  res.status(200).set({
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-store',
    'X-Accel-Buffering': 'no',
  });
  res.flushHeaders();
  const ctl = new AbortController();
  const keepalive = setInterval(() => res.write(': keepalive\n\n'), KEEPALIVE_MS);
  res.on('close', () => {
    clearInterval(keepalive);
    ctl.abort();
  });
  const send = (event: string, data: unknown, id?: string): void => {
    if (ctl.signal.aborted) return;
    res.write(`${id ? `id: ${id}\n` : ''}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  };
  return { send, closed: ctl.signal };
}

/** The refusal a page shows instead of an empty pane: HTTP code, reason and the API server's message. */
export function refusal(err: unknown): { code: number; reason: string; message: string } {
  if (isApiError(err)) return { code: err.code, reason: err.reason, message: err.message };
  return { code: 502, reason: 'BadGateway', message: err instanceof Error ? err.message : String(err) };
}

const terminal = (err: unknown): boolean => isApiError(err) && err.code >= 400 && err.code < 500 && err.code !== 429;

function slim(o: KubeObject): KubeObject {
  const { managedFields: _m, ...metadata } = o.metadata;
  return { ...o, metadata };
}

/** list+watch `path` as the user; `snapshot` once synced, then `delta`s; `refused` (and the end) on 4xx. */
export function watchToStream(
  client: KubeClient,
  path: string,
  query: Record<string, string>,
  req: Request,
  res: Response,
): void {
  const { send, closed } = openStream(req, res);
  let ready = false;
  const lw = new ListWatch<KubeObject>(
    client,
    {
      path,
      labelSelector: query.labelSelector,
      fieldSelector: query.fieldSelector,
      transform: slim,
      onError: (err) => {
        if (!terminal(err)) return send('problem', refusal(err));
        send('refused', refusal(err));
        lw.stop();
        res.end();
      },
    },
    (d) => {
      if (ready) send('delta', { type: d.type, object: d.object });
    },
  );
  closed.addEventListener('abort', () => lw.stop());
  lw.start();
  void lw.synced.then(() => {
    ready = true;
    send('snapshot', lw.store.list());
  });
}

interface LogItem {
  time: string;
  stream: string;
  message: string;
  cursor?: string;
}

function emitLines(
  text: string,
  send: (e: string, d: unknown, id?: string) => void,
): { rest: string; cursor?: string } {
  const lines = text.split('\n');
  const rest = lines.pop() ?? '';
  let cursor: string | undefined;
  for (const line of lines.filter(Boolean)) {
    const item = JSON.parse(line) as LogItem;
    cursor = item.cursor ?? cursor;
    send('log', item, item.cursor);
  }
  return { rest, cursor };
}

async function followOnce(
  client: KubeClient,
  path: string,
  cursor: string | undefined,
  s: LogStream,
): Promise<string | undefined> {
  const res = await client.stream(path, {
    query: { follow: 'true', ...(cursor ? { cursor } : {}) },
    signal: s.closed,
  });
  let buf = '';
  let last = cursor;
  for await (const chunk of res as AsyncIterable<Buffer>) {
    const r = emitLines(buf + chunk.toString('utf8'), s.send);
    buf = r.rest;
    last = r.cursor ?? last;
    s.onCursor(last);
  }
  if (!res.complete) throw new Error('log stream interrupted');
  return last;
}

interface LogStream {
  send: (e: string, d: unknown, id?: string) => void;
  closed: AbortSignal;
  onCursor: (c: string | undefined) => void;
}

/**
 * Follows a Run's log as the user from `cursor` (the browser's Last-Event-ID after its own
 * reconnect); reconnects upstream with the last cursor, so no record is lost or repeated.
 */
export async function followToStream(
  client: KubeClient,
  path: string,
  cursor: string | undefined,
  req: Request,
  res: Response,
): Promise<void> {
  const { send, closed } = openStream(req, res);
  let last = cursor;
  const s: LogStream = { send, closed, onCursor: (c) => (last = c) };
  for (let attempt = 0; !closed.aborted; attempt++) {
    try {
      last = await followOnce(client, path, last, s);
      send('end', { cursor: last });
      break;
    } catch (err) {
      if (closed.aborted) break;
      if (waitingToStart(err)) send('waiting', refusal(err));
      else if (terminal(err)) {
        send('refused', refusal(err));
        break;
      } else send('problem', refusal(err));
      await new Promise((r) => setTimeout(r, Math.min(5000, 250 * 2 ** Math.min(attempt, 5))));
    }
  }
  res.end();
}
