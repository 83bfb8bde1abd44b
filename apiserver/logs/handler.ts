/**
 * logs.kruntimes.io/v1alpha1: GET .../namespaces/{ns}/runs/{name}/log, served behind API
 * aggregation. The API server has already authorised `get` on `runs/log` for the caller; this
 * backend reads the Run, then its assigned Runtime Pod's runtimed log through pods/log (the
 * only Pod permission it holds) and returns that Run's records only: a JSON snapshot, or NDJSON
 * when following, each record with an opaque cursor to resume exactly after it.
 */
import type { IncomingMessage } from 'node:http';
import type { Readable, Writable } from 'node:stream';
import express, { type Request, type Response, type Router } from 'express';
import type { Logger } from 'pino';
import type { KubeClient } from '../../lib/kube/client.ts';
import { isApiError } from '../../lib/kube/errors.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { isTerminal } from '../../lib/run/phases.ts';
import {
  after,
  decodeCursor,
  encodeCursor,
  followDone,
  parseEnd,
  parseRecord,
  parseTail,
  tailWindowSuffices,
  LineSplitter,
  RecordTail,
  MAX_TAIL,
  type CursorPos,
} from './records.ts';
import { validObjectPath } from '../aggregation/names.ts';
import { status } from '../aggregation/status.ts';

export const LOGS_GROUP = 'logs.kruntimes.io';
export type RunObj = KubeObject & { status?: { phase?: string; assignedPod?: string; attempt?: number } };

export class HttpError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/** A Run from the extension server's informer cache (the watch relay's), or undefined when not cached. */
export type RunLookup = (ns: string, name: string) => RunObj | undefined;

/**
 * The Run and its Runtime Pod. A cached Run already assigned to a Pod is used as it is (no GET on
 * the request's path); an unassigned or uncached one is read from the API server, so a Run just
 * scheduled is never answered "waiting to start" from a cache that has not seen its binding yet.
 */
export async function loadRun(
  client: Pick<KubeClient, 'get'>,
  ns: string,
  name: string,
  cached: RunLookup = () => undefined,
): Promise<{ run: RunObj; pod: string }> {
  const hit = cached(ns, name);
  if (hit?.status?.assignedPod) return { run: hit, pod: hit.status.assignedPod };
  let run: RunObj;
  try {
    run = await client.get<RunObj>(`/apis/kruntimes.io/v1alpha1/namespaces/${ns}/runs/${name}`);
  } catch (err) {
    if (isApiError(err, 404))
      throw new HttpError(404, 'NotFound', `runs.kruntimes.io "${name}" not found in namespace ${ns}`);
    throw err;
  }
  return { run, pod: assignedPod(run, ns, name) };
}

/**
 * The Runtime Pod whose runtimed log holds the Run's records. A Run not assigned yet is answered
 * like `pods/log` of a Pod whose container has not started: 400 BadRequest "is waiting to start"
 * (retry later). 409 Conflict is reserved for "the Runtime Pod is gone" (`gonePod`).
 */
export function assignedPod(run: RunObj, ns: string, name: string): string {
  const pod = run.status?.assignedPod;
  if (!pod)
    throw new HttpError(
      400,
      'BadRequest',
      `Run ${ns}/${name} is waiting to start: not assigned to a Runtime Pod yet (phase ${run.status?.phase ?? 'Pending'}); its logs appear once it is scheduled`,
    );
  return pod;
}

function podLogPath(run: RunObj, pod: string): string {
  const since = run.metadata.creationTimestamp
    ? `&sinceTime=${encodeURIComponent(run.metadata.creationTimestamp)}`
    : '';
  return `/api/v1/namespaces/${run.metadata.namespace}/pods/${pod}/log?container=runtimed${since}`;
}

/**
 * Maps a failed Pod log read. 404 (the Pod object is gone) is the only 409 Conflict of this API:
 * the Run's logs went with its Runtime Pod. 400 (Kubernetes: the container "is waiting to start")
 * stays 400 BadRequest, retryable like an unassigned Run.
 */
export function gonePod(err: unknown, ns: string, name: string, pod: string): unknown {
  if (isApiError(err, 404))
    return new HttpError(
      409,
      'Conflict',
      `the Runtime Pod ${pod} that ran Run ${ns}/${name} no longer exists; its logs are gone with it`,
    );
  if (isApiError(err, 400))
    return new HttpError(
      400,
      'BadRequest',
      `Run ${ns}/${name}: the Runtime Pod ${pod} cannot serve logs yet: ${err.message}`,
    );
  return err;
}

/** Opens a Pod log read (the query string is appended to the runtimed container's log path). */
export type OpenLog = (path: string) => Promise<Readable>;

/**
 * The Pod log lines a snapshot of `tail` records reads first: the end of the log since the Run's
 * creation, with room for other Runs' records interleaved (a Runtime Pod runs several at once).
 */
export const windowLines = (tail: number): number => Math.max(tail, 1) + 64;

async function readRecords(open: OpenLog, path: string, records: RecordTail): Promise<RecordTail> {
  const upstream = await open(path);
  // Streamed: only the kept records are in memory, never the whole Pod log.
  upstream.setEncoding('utf8');
  for await (const chunk of upstream) records.write(chunk as string);
  return records;
}

/**
 * A snapshot: without a cursor, the last windowLines(tail) lines of the log first (a tail read,
 * served from the end); the whole log since the Run's creation only when that window holds
 * neither the requested records nor the Run's first one (tailWindowSuffices). With a cursor, the whole
 * log since the Run's creation (the cursor may point anywhere in it).
 */
export async function readSnapshot(
  open: OpenLog,
  run: RunObj,
  pod: string,
  tail: number,
  cursor?: CursorPos,
): Promise<{ items: unknown[]; cursor?: string }> {
  const path = podLogPath(run, pod);
  const uid = run.metadata.uid ?? '';
  const read = (p: string, records: RecordTail): Promise<RecordTail> =>
    readRecords(open, p, records).catch((err: unknown) => {
      throw gonePod(err, run.metadata.namespace ?? '', run.metadata.name ?? '', pod);
    });
  if (!cursor) {
    const window = windowLines(tail);
    const w = await read(`${path}&tailLines=${window}`, new RecordTail(uid, tail));
    if (tailWindowSuffices({ recordsRead: w.recordsRead, tail, sawStart: w.sawStart })) return w.end();
  }
  return (await read(path, new RecordTail(uid, cursor ? MAX_TAIL : tail, cursor))).end();
}

/** Follows until the Run is terminal and its last records were delivered, or the caller leaves. */
async function follow(
  client: KubeClient,
  res: Response,
  req: Request,
  start: { run: RunObj; pod: string; cursor?: CursorPos },
): Promise<void> {
  const { run, pod } = start;
  const ns = run.metadata.namespace ?? '';
  const upstream = await client.stream(`${podLogPath(run, pod)}&follow=true`).catch((err: unknown) => {
    throw gonePod(err, ns, run.metadata.name ?? '', pod);
  });
  res.writeHead(200, { 'Content-Type': 'application/x-ndjson', 'Cache-Control': 'no-store' });
  const state = relayRecords(upstream, res, run.metadata.uid ?? '', start.cursor);
  let terminalAttempt: number | undefined;
  const stop = (): void => {
    clearInterval(timer);
    upstream.destroy();
    res.end();
  };
  const check = (): void => {
    const quietMs = Date.now() - state.lastDataAt;
    if (followDone({ terminalAttempt, endedAttempt: state.endedAttempt, quietMs, paused: upstream.isPaused() })) stop();
  };
  state.onEnd = check;
  const timer = setInterval(() => {
    if (terminalAttempt !== undefined) {
      check();
      return;
    }
    client.get<RunObj>(`/apis/kruntimes.io/v1alpha1/namespaces/${ns}/runs/${run.metadata.name}`).then(
      (r) => {
        if (isTerminal(r.status?.phase)) terminalAttempt = r.status?.attempt ?? 1;
        check();
      },
      (err: unknown) => {
        if (isApiError(err, 404)) stop();
      },
    );
  }, 500);
  upstream.on('end', stop);
  upstream.on('error', stop);
  (req as IncomingMessage).on('close', stop);
  await new Promise<void>((r) => res.on('close', () => r()));
}

export interface RelayState {
  lastDataAt: number;
  endedAttempt: number;
  onEnd: () => void;
  /** Characters of an unfinished log line held (at most MAX_LINE_BYTES). */
  buffered: () => number;
}

/**
 * Writes the Run's records from the Pod log stream to the caller, each after the cursor once,
 * pausing the stream while the caller is not reading (no unbounded buffering here).
 */
export function relayRecords(
  upstream: Readable,
  res: Writable,
  uid: string,
  cursor: CursorPos | undefined,
): RelayState {
  const lines = new LineSplitter();
  const state: RelayState = {
    lastDataAt: Date.now(),
    endedAttempt: 0,
    onEnd: () => undefined,
    buffered: () => lines.held,
  };
  let last = cursor;
  upstream.setEncoding('utf8');
  upstream.on('data', (chunk: string) => {
    state.lastDataAt = Date.now();
    let ended = false;
    for (const line of lines.push(chunk)) {
      const r = parseRecord(line, uid);
      if (r && after(r, last)) {
        last = r;
        res.write(`${JSON.stringify({ ...r, cursor: encodeCursor(r) })}\n`);
      }
      const end = r ? undefined : parseEnd(line, uid);
      if (end !== undefined && end > state.endedAttempt) {
        state.endedAttempt = end;
        ended = true;
      }
    }
    if (res.writableNeedDrain && !upstream.isPaused()) {
      upstream.pause();
      res.once('drain', () => {
        state.lastDataAt = Date.now();
        upstream.resume();
      });
    }
    if (ended) state.onEnd();
  });
  return state;
}

async function serveLog(client: KubeClient, cached: RunLookup, req: Request, res: Response): Promise<void> {
  const ns = String(req.params.ns);
  const name = String(req.params.name);
  const tail = parseTail(req.query.tailLines);
  if (typeof tail === 'string') throw new HttpError(400, 'BadRequest', tail);
  const rawCursor = typeof req.query.cursor === 'string' ? req.query.cursor : undefined;
  const cursor = rawCursor === undefined ? undefined : decodeCursor(rawCursor);
  if (rawCursor !== undefined && !cursor)
    throw new HttpError(400, 'BadRequest', 'cursor is not a cursor returned by this API; reconnect without it');
  const { run, pod } = await loadRun(client, ns, name, cached);
  const open: OpenLog = (path) => client.stream(path);
  if (req.query.follow !== 'true') {
    const snap = await readSnapshot(open, run, pod, tail, cursor);
    res.json({ apiVersion: `${LOGS_GROUP}/v1alpha1`, kind: 'RunLog', metadata: { name, namespace: ns }, ...snap });
    return;
  }
  let from = cursor;
  if (!from && req.query.tailLines !== undefined) {
    const snap = await readSnapshot(open, run, pod, tail);
    const first = snap.items[0] as { attempt: number; seq: number } | undefined;
    if (first)
      from =
        first.seq > 0
          ? { attempt: first.attempt, seq: first.seq - 1 }
          : { attempt: first.attempt - 1, seq: Number.MAX_SAFE_INTEGER };
    else if (snap.cursor) from = decodeCursor(snap.cursor);
  }
  await follow(client, res, req, { run, pod, ...(from ? { cursor: from } : {}) });
}

/** `cached`: the Runs of the extension server's informer cache, when it holds them (see loadRun). */
export function logsRouter(client: KubeClient, log: Logger, cached: RunLookup = () => undefined): Router {
  const r = express.Router();
  r.get(`/apis/${LOGS_GROUP}/v1alpha1/namespaces/:ns/runs/:name/log`, validObjectPath, (req, res) => {
    serveLog(client, cached, req, res).catch((err: unknown) => {
      if (res.headersSent) {
        res.end();
        return;
      }
      if (err instanceof HttpError) {
        status(res, err.code, err.reason, err.message);
        return;
      }
      log.error({ err }, 'run log request failed');
      status(
        res,
        500,
        'InternalError',
        `reading the Run log failed: ${err instanceof Error ? err.message : String(err)}`,
      );
    });
  });
  return r;
}
