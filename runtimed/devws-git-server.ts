/**
 * `kruntimes devws-git-server`: the Git Server of developer workspaces (ADR 0020). It holds one
 * bare repository per Project (`<root>/<namespace>/<project>.git`) with the binding's snapshots
 * (`refs/ora/upstreams/<bindingId>/snapshots/<commit>`) and serves them read-only over smart HTTP
 * (`git http-backend`, upload-pack only) to the Nodes, which clone only from here. One more
 * endpoint, `POST /-/sync`, is the sync function's: with the sync token it fetches the binding
 * branch of the external repository (https only) and records a snapshot of its commit.
 */
import { execFile, spawn } from 'node:child_process';
import { timingSafeEqual } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { DevwsError } from '../lib/devws/api.ts';
import { snapshotRef, validateSyncRequest, type SyncRequest } from '../lib/devws/sync.ts';

export interface GitServerOptions {
  /** Where the Projects' bare repositories live. */
  root: string;
  cert: Buffer | string;
  key: Buffer | string;
  /** The bearer token of POST /-/sync (the sync function's). */
  syncToken: string;
  /** CA bundle (PEM file) for fetching external repositories; unset: the system's. */
  externalCAFile?: string;
  host?: string;
  port?: number;
}

export interface RunningGitServer {
  /** https://host:port: the base URL of the repositories (gitServerUrl). */
  url: string;
  close(): Promise<void>;
}

/** Repository paths the server answers: /<namespace>/<project>.git/(info/refs|git-upload-pack). */
const REPO_PATH =
  /^\/([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)\/([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?)\.git\/(info\/refs|git-upload-pack)$/;

function git(args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const base = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: cwd, GIT_TERMINAL_PROMPT: '0' };
    execFile(
      'git',
      args,
      { cwd, timeout: 120_000, maxBuffer: 1024 * 1024, env: { ...base, ...env } },
      (err, out, errOut) => {
        if (err)
          reject(
            new Error(
              `git ${args.find((a) => !a.startsWith('-') && !a.includes('=')) ?? ''}: ${String(errOut).trim().slice(-512) || err.message}`,
            ),
          );
        else resolve(String(out).trim());
      },
    );
  });
}

/** One sync at a time per repository. */
const locks = new Map<string, Promise<unknown>>();
function serialized<T>(key: string, run: () => Promise<T>): Promise<T> {
  const prev = locks.get(key) ?? Promise.resolve();
  const next = prev.then(run, run);
  locks.set(
    key,
    next.catch(() => undefined),
  );
  return next;
}

/**
 * Fetches the binding branch of the external repository into the Project's repository and records
 * the snapshot ref of its commit. Only the https transport is allowed (no file, ext or ssh).
 */
export async function syncRepository(o: GitServerOptions, r: SyncRequest): Promise<{ ref: string; commit: string }> {
  const dir = join(o.root, r.namespace, `${r.project}.git`);
  return serialized(dir, async () => {
    if (!existsSync(join(dir, 'HEAD'))) {
      mkdirSync(dir, { recursive: true, mode: 0o750 });
      await git(['init', '-q', '--bare', dir], o.root);
      await git(['config', 'http.receivepack', 'false'], dir);
    }
    const env = o.externalCAFile ? { GIT_SSL_CAINFO: o.externalCAFile } : {};
    const head = `refs/ora/upstreams/${r.bindingId}/heads/${r.branch}`;
    const allow = ['-c', 'protocol.allow=never', '-c', 'protocol.https.allow=always'];
    await git([...allow, 'fetch', '-q', '--no-tags', '--', r.url, `+refs/heads/${r.branch}:${head}`], dir, env);
    const commit = await git(['rev-parse', '--verify', `${head}^{commit}`], dir);
    const ref = snapshotRef(r.bindingId, commit);
    await git(['update-ref', ref, commit], dir);
    return { ref, commit };
  });
}

function send(res: ServerResponse, code: number, body: unknown): void {
  res.writeHead(code, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

function authorized(req: IncomingMessage, token: string): boolean {
  const got = Buffer.from(/^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '');
  const want = Buffer.from(token);
  return token.length > 0 && got.length === want.length && timingSafeEqual(got, want);
}

async function readJson(req: IncomingMessage, limit = 64 * 1024): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > limit) throw new DevwsError('invalid_sync_request', 400, 'the request body is too large');
    chunks.push(c);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch {
    throw new DevwsError('invalid_sync_request', 400, 'the request body is not JSON');
  }
}

/** POST /-/sync: 200 {ref, commit}; 400 a bad request; 422 repository_sync_failed (the fetch failed). */
async function handleSync(o: GitServerOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (!authorized(req, o.syncToken)) return send(res, 401, { reason: 'unauthorized' });
  let r: SyncRequest;
  try {
    r = validateSyncRequest(await readJson(req));
  } catch (e) {
    if (e instanceof DevwsError) return send(res, e.code, { reason: e.reason, message: e.message });
    throw e;
  }
  try {
    send(res, 200, await syncRepository(o, r));
  } catch (e) {
    send(res, 422, { reason: 'repository_sync_failed', message: e instanceof Error ? e.message : String(e) });
  }
}

/**
 * The CGI bridge to `git http-backend` for the repositories below `root` (what it may serve is
 * the caller's to decide: the Git Server routes upload-pack only). Also the test git servers'.
 */
export function serveGit(root: string, req: IncomingMessage, res: ServerResponse, url: URL): void {
  const cgi = spawn('git', ['http-backend'], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      GIT_PROJECT_ROOT: root,
      GIT_HTTP_EXPORT_ALL: '1',
      PATH_INFO: url.pathname,
      QUERY_STRING: url.search.slice(1),
      REQUEST_METHOD: req.method ?? 'GET',
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      REMOTE_ADDR: req.socket.remoteAddress ?? '',
      GIT_PROTOCOL: String(req.headers['git-protocol'] ?? ''),
      ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: req.headers['content-encoding'] } : {}),
    },
  });
  req.pipe(cgi.stdin);
  let head = Buffer.alloc(0);
  let body = false;
  cgi.stdout.on('data', (chunk: Buffer) => {
    if (body) {
      res.write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) return;
    body = true;
    let status = 200;
    for (const line of head.subarray(0, end).toString().split('\r\n')) {
      const i = line.indexOf(':');
      const k = line.slice(0, i).trim();
      const v = line.slice(i + 1).trim();
      if (k.toLowerCase() === 'status') status = Number(v.split(' ')[0]);
      else res.setHeader(k, v);
    }
    res.writeHead(status);
    res.write(head.subarray(end + 4));
  });
  cgi.on('error', () => send(res, 500, { reason: 'git_unavailable' }));
  cgi.on('close', () => res.end());
}

export function route(o: GitServerOptions, req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? '/', 'https://git');
  if (url.pathname === '/-/sync' && req.method === 'POST') {
    handleSync(o, req, res).catch(() => send(res, 500, { reason: 'internal' }));
    return;
  }
  const m = REPO_PATH.exec(url.pathname);
  const infoRefs =
    m?.[5] === 'info/refs' && req.method === 'GET' && url.searchParams.get('service') === 'git-upload-pack';
  const pack = m?.[5] === 'git-upload-pack' && req.method === 'POST';
  if (!infoRefs && !pack) return send(res, 404, { reason: 'not_found' });
  serveGit(o.root, req, res, url);
}

export async function startGitServer(o: GitServerOptions): Promise<RunningGitServer> {
  mkdirSync(o.root, { recursive: true, mode: 0o750 });
  const srv = https.createServer({ cert: o.cert, key: o.key }, (req, res) => route(o, req, res));
  await new Promise<void>((resolve) => srv.listen(o.port ?? 0, o.host ?? '0.0.0.0', () => resolve()));
  const { port } = srv.address() as AddressInfo;
  return {
    url: `https://${o.host && o.host !== '0.0.0.0' ? o.host : 'localhost'}:${port}`,
    close: () =>
      new Promise((resolve) => {
        srv.close(() => resolve());
        srv.closeAllConnections();
      }),
  };
}

/** The daemon's configuration from its environment (files mounted from Secrets). */
export function loadGitServerOptions(env: NodeJS.ProcessEnv): GitServerOptions {
  const need = (k: string): string => {
    const v = env[k];
    if (!v) throw new Error(`devws-git-server: environment variable ${k} is required`);
    return v;
  };
  const syncToken = readFileSync(need('KRT_GIT_SYNC_TOKEN_FILE'), 'utf8').trim();
  if (!syncToken) throw new Error('devws-git-server: the sync token file is empty');
  return {
    root: need('KRT_GIT_ROOT'),
    cert: readFileSync(need('KRT_GIT_TLS_CERT')),
    key: readFileSync(need('KRT_GIT_TLS_KEY')),
    syncToken,
    ...(env.KRT_GIT_EXTERNAL_CA ? { externalCAFile: env.KRT_GIT_EXTERNAL_CA } : {}),
    port: Number(env.KRT_GIT_PORT ?? '8443'),
  };
}
