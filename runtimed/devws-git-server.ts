/**
 * `kruntimes devws-git-server`: the Git Server of developer workspaces (ADR 0020, ADR 0026). It
 * holds one bare repository per Project (`<root>/<namespace>/<project>.git`) with the binding's
 * snapshots (`refs/ora/upstreams/<bindingId>/snapshots/<commit>`) and serves them read-only over
 * smart HTTP (`git http-backend`, upload-pack only) to the Nodes, which clone only from here.
 * Every read is authenticated (a Kubernetes token for the Git audience, TokenReview) and
 * authorised for its Project (a Node only for the Project of its own Workspace, anyone else by a
 * SubjectAccessReview); the API server not answering refuses (503). One more endpoint,
 * `POST /-/sync`, is the sync function's: with the sync token it fetches the binding branch of the
 * Project's own repository (read from the Project object; https, or ssh with a credentialRef and
 * strict host keys; never an internal address unless allow-listed) and records a snapshot of its
 * commit.
 */
import { execFile, spawn } from 'node:child_process';
import { timingSafeEqual } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import { isIP, type AddressInfo } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { DevwsError } from '../lib/devws/api.ts';
import {
  authorizeNode,
  bearerToken,
  GIT_AUDIENCE,
  GitAccessError,
  nodeOf,
  ReviewCache,
  tokenDigest,
} from '../lib/devws/git-access.ts';
import { snapshotRef, syncTarget, validateSyncRequest, type SyncTarget } from '../lib/devws/sync.ts';
import {
  configEnv,
  credentialConfig,
  credentialOf,
  fetchFailure,
  requireCredential,
  type GitCredential,
} from '../lib/devws/credential.ts';
import {
  passwdFiles,
  repositoryEndpoint,
  sshCommand,
  type RepositoryEndpoint,
  type SshUser,
} from '../lib/devws/ssh.ts';
import { parseCidrList, vetAddresses, type TargetPolicy } from '../lib/devws/sync-target.ts';
import { kubeGitAuthority, type GitAuthority } from './devws-git-authority.ts';
import { defaultClient } from '../lib/kube/config.ts';
import type { KubeClient } from '../lib/kube/client.ts';

export interface GitServerOptions {
  /** Where the Projects' bare repositories live. */
  root: string;
  cert: Buffer | string;
  key: Buffer | string;
  /** The bearer token of POST /-/sync (the sync function's). */
  syncToken: string;
  /** Reviews tokens, authorises reads and reads Projects (the Kubernetes API: kubeGitAuthority). */
  authority: GitAuthority;
  /** Where a sync may fetch from beyond the public internet (allow) and what else it must not (deny). */
  targets?: TargetPolicy;
  /** Resolves a repository host to its addresses (default: the system resolver, every address). */
  resolve?: (host: string) => Promise<string[]>;
  /** How long an allowed read is remembered per token digest and Project (default 10 s). */
  reviewTtlMs?: number;
  /** CA bundle (PEM file) for fetching external repositories; unset: the system's. */
  externalCAFile?: string;
  host?: string;
  port?: number;
  /** Told of every internal failure and every 5xx refusal (never a token: none is in an error). */
  onError?: (err: unknown) => void;
}

export interface RunningGitServer {
  /** https://host:port: the base URL of the repositories (gitServerUrl). */
  url: string;
  close(): Promise<void>;
}

export const REVIEW_TTL_MS = 10_000;

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

const systemResolve = async (host: string): Promise<string[]> =>
  (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);

/** Where a fetch goes: the vetted address it is pinned to, and git's options that pin it and forbid redirects. */
export interface PinnedFetch {
  endpoint: RepositoryEndpoint;
  address: string;
  options: string[];
}

/**
 * Vets the repository host (every address it resolves to; ADR 0026) and returns where the fetch is
 * pinned: https by `http.curloptResolve` (and no redirects), ssh by the ssh command's `HostName`.
 */
export async function pinnedFetch(o: GitServerOptions, url: string): Promise<PinnedFetch> {
  const endpoint = repositoryEndpoint(url);
  const { host } = endpoint;
  const policy = o.targets ?? { allow: [], deny: [] };
  const literal = isIP(host) !== 0;
  let addresses: string[];
  try {
    addresses = literal ? [host] : await (o.resolve ?? systemResolve)(host);
  } catch {
    throw new GitAccessError('repository_sync_failed', 422, `${host} does not resolve`);
  }
  const address = vetAddresses(host, addresses, policy);
  if (endpoint.transport === 'ssh') return { endpoint, address, options: ['-c', 'protocol.ssh.allow=always'] };
  const pin = isIP(address) === 6 ? `[${address}]` : address;
  const resolve = literal ? [] : ['-c', `http.curloptResolve=${host}:${endpoint.port}:${pin}`];
  const options = ['-c', 'protocol.https.allow=always', '-c', 'http.followRedirects=false', ...resolve];
  return { endpoint, address, options };
}

/** Where Debian-based images and hosts install nss_wrapper (libnss-wrapper); KRT_NSS_WRAPPER overrides. */
const NSS_WRAPPER = [
  '/usr/lib/x86_64-linux-gnu/libnss_wrapper.so',
  '/usr/lib/aarch64-linux-gnu/libnss_wrapper.so',
  '/usr/lib64/libnss_wrapper.so',
  '/usr/lib/libnss_wrapper.so',
];

const hasPasswdEntry = (): boolean => {
  try {
    userInfo();
    return true;
  } catch {
    return false;
  }
};

/**
 * ssh's passwd entry when this process's uid has none (ADR 0036): files in the fetch's scratch
 * directory, read through nss_wrapper preloaded into ssh only. Without nss_wrapper the sync says
 * so (ssh_unavailable) instead of failing in ssh ("No user exists for uid").
 */
export function sshUser(
  dir: string,
  o: { hasEntry?: () => boolean; libraries?: string[]; uid?: number; gid?: number } = {},
): SshUser | undefined {
  if ((o.hasEntry ?? hasPasswdEntry)()) return undefined;
  const uid = o.uid ?? process.getuid?.() ?? 0;
  const gid = o.gid ?? process.getgid?.() ?? 0;
  const libraries = o.libraries ?? [process.env.KRT_NSS_WRAPPER ?? '', ...NSS_WRAPPER];
  const library = libraries.find((l) => l !== '' && existsSync(l));
  if (!library)
    throw new GitAccessError(
      'ssh_unavailable',
      422,
      `ssh cannot run as uid ${uid}: it has no passwd entry and nss_wrapper (libnss-wrapper) is not installed`,
    );
  const files = passwdFiles(uid, gid, dir);
  const user = { library, passwd: join(dir, 'passwd'), group: join(dir, 'group') };
  writeFileSync(user.passwd, files.passwd, { mode: 0o600 });
  writeFileSync(user.group, files.group, { mode: 0o600 });
  return user;
}

/**
 * Runs `use` with git's environment for the credential: https, an Authorization header scoped to
 * the URL; ssh, GIT_SSH_COMMAND over a key and known_hosts written for this fetch only (a private
 * directory, mode 0600, removed afterwards; never the command line). Without a credential, https
 * only (an ssh repository always has one: requireCredential).
 */
async function withCredentialEnv<T>(
  pinned: PinnedFetch,
  url: string,
  credential: GitCredential | undefined,
  use: (env: Record<string, string>) => Promise<T>,
): Promise<T> {
  if (credential?.kind !== 'ssh') return use(credential ? configEnv(credentialConfig(credential, url)) : {});
  const dir = mkdtempSync(join(tmpdir(), 'krt-git-ssh-'));
  try {
    const keyFile = join(dir, 'id');
    const knownHostsFile = join(dir, 'known_hosts');
    writeFileSync(keyFile, credential.privateKey, { mode: 0o600 });
    writeFileSync(knownHostsFile, credential.knownHosts, { mode: 0o600 });
    const user = sshUser(dir);
    const command = sshCommand({
      endpoint: pinned.endpoint,
      address: pinned.address,
      keyFile,
      knownHostsFile,
      ...(user ? { user } : {}),
    });
    return await use({ GIT_SSH_COMMAND: command, GIT_SSH_VARIANT: 'ssh' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Fetches the binding branch of the Project's repository into the Project's repository here and
 * records the snapshot ref of its commit. Only the https and ssh transports are allowed (no file
 * or ext), only to a vetted address, without redirects; with the Project's credential
 * (credentialRef) in git's environment only (withCredentialEnv).
 */
export async function syncRepository(
  o: GitServerOptions,
  t: SyncTarget,
  credential?: GitCredential,
): Promise<{ ref: string; commit: string }> {
  const dir = join(o.root, t.namespace, `${t.project}.git`);
  return serialized(dir, async () => {
    const pinned = await pinnedFetch(o, t.url);
    if (!existsSync(join(dir, 'HEAD'))) {
      mkdirSync(dir, { recursive: true, mode: 0o750 });
      await git(['init', '-q', '--bare', dir], o.root);
      await git(['config', 'http.receivepack', 'false'], dir);
    }
    const ca = o.externalCAFile ? { GIT_SSL_CAINFO: o.externalCAFile } : {};
    const head = `refs/ora/upstreams/${t.bindingId}/heads/${t.branch}`;
    const fetch = ['-c', 'protocol.allow=never', ...pinned.options, 'fetch', '-q', '--no-tags', '--', t.url];
    await withCredentialEnv(pinned, t.url, credential, (env) =>
      git([...fetch, `+refs/heads/${t.branch}:${head}`], dir, { ...ca, ...env }).catch((e: unknown) => {
        throw fetchFailure(e instanceof Error ? e.message : String(e), credential);
      }),
    );
    const commit = await git(['rev-parse', '--verify', `${head}^{commit}`], dir);
    const ref = snapshotRef(t.bindingId, commit);
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

function refuse(o: GitServerOptions, res: ServerResponse, e: unknown): void {
  const typed = e instanceof GitAccessError || e instanceof DevwsError;
  if (!typed || e.code >= 500) o.onError?.(e);
  if (typed) {
    const headers = e.code === 401 ? { 'www-authenticate': `Bearer realm="${GIT_AUDIENCE}"` } : {};
    res.writeHead(e.code, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify({ reason: e.reason, message: e.message }));
    return;
  }
  send(res, 500, { reason: 'internal' });
}

/** The Kubernetes API not answering is never read as an answer: 503 authorization_unavailable. */
async function asked<T>(what: string, call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new GitAccessError('authorization_unavailable', 503, `${what}: ${why.slice(0, 200)}`);
  }
}

/**
 * POST /-/sync: 200 {ref, commit}; 401 without the sync token; 400 a bad request; 404/409 the
 * Project is missing, not syncable or not what the request names; 403 sync_target_forbidden (an
 * internal address); 422 repository_sync_failed (the fetch failed), host_key_unverified (ssh: the
 * host key is not in known_hosts) or a credential_* reason (credential_required: an ssh repository
 * without one; the credentialRef Secret is missing, not granted to the Git Server or unusable; the
 * repository refused it); 503 the API did not answer.
 */
async function handleSync(o: GitServerOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  try {
    if (!authorized(req, o.syncToken)) throw new GitAccessError('unauthenticated', 401, 'the sync token is required');
    const r = validateSyncRequest(await readJson(req));
    const t = syncTarget(r, await asked('reading the Project', o.authority.project(r.namespace, r.project)));
    requireCredential(t.url, t.credentialRef);
    const credential = t.credentialRef
      ? credentialOf(
          `${t.namespace}/${t.credentialRef}`,
          await asked('reading the credential', o.authority.secret(t.namespace, t.credentialRef)),
          t.url,
        )
      : undefined;
    let result: { ref: string; commit: string };
    try {
      result = await syncRepository(o, t, credential);
    } catch (e) {
      if (e instanceof GitAccessError) throw e;
      throw new GitAccessError('repository_sync_failed', 422, e instanceof Error ? e.message : String(e));
    }
    send(res, 200, result);
  } catch (e) {
    refuse(o, res, e);
  }
}

/**
 * Removes a deleted Project's repository (ADR 0026): POST /-/remove {namespace, project} with the
 * sync token; 200 {removed} when the Project is gone or deleted (idempotent), 409
 * project_not_deleted while it lives. Serialized with the repository's syncs.
 */
async function handleRemove(o: GitServerOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  try {
    if (!authorized(req, o.syncToken)) throw new GitAccessError('unauthenticated', 401, 'the sync token is required');
    const r = validateSyncRequest(await readJson(req));
    const p = await asked('reading the Project', o.authority.project(r.namespace, r.project));
    if (p && p.status?.lifecycle !== 'deleted')
      throw new GitAccessError('project_not_deleted', 409, `Project ${r.namespace}/${r.project} is not deleted`);
    const dir = join(o.root, r.namespace, `${r.project}.git`);
    const removed = await serialized(dir, () => {
      const existed = existsSync(dir);
      rmSync(dir, { recursive: true, force: true });
      return Promise.resolve(existed);
    });
    send(res, 200, { removed });
  } catch (e) {
    refuse(o, res, e);
  }
}

/**
 * Authenticates and authorises a read of namespace/project: 401 unauthenticated (no token, or one
 * the API does not accept for the Git audience), 403 repository_forbidden, 503
 * authorization_unavailable. Allowed answers are remembered briefly per token digest and Project.
 */
export async function authorizeRead(
  o: GitServerOptions,
  cache: ReviewCache<true>,
  header: string | undefined,
  namespace: string,
  project: string,
): Promise<void> {
  const token = bearerToken(header);
  if (!token)
    throw new GitAccessError('unauthenticated', 401, `a bearer token for the audience ${GIT_AUDIENCE} is required`);
  const key = `${tokenDigest(token)} ${namespace}/${project}`;
  if (cache.get(key)) return;
  const id = await asked('TokenReview', o.authority.review(token));
  if (!id) throw new GitAccessError('unauthenticated', 401, `the token is not valid for the audience ${GIT_AUDIENCE}`);
  const node = nodeOf(id);
  if (node)
    authorizeNode(node, namespace, project, await asked('listing Workspaces', o.authority.workspaces(namespace)));
  else if (!(await asked('SubjectAccessReview', o.authority.mayRead(id, namespace, project))))
    throw new GitAccessError(
      'repository_forbidden',
      403,
      `${id.username} may not get projects/repository ${namespace}/${project}`,
    );
  cache.set(key, true);
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

export function route(o: GitServerOptions, cache: ReviewCache<true>, req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? '/', 'https://git');
  if (url.pathname === '/-/sync' && req.method === 'POST') {
    void handleSync(o, req, res);
    return;
  }
  if (url.pathname === '/-/remove' && req.method === 'POST') {
    void handleRemove(o, req, res);
    return;
  }
  const m = REPO_PATH.exec(url.pathname);
  const infoRefs =
    m?.[5] === 'info/refs' && req.method === 'GET' && url.searchParams.get('service') === 'git-upload-pack';
  const pack = m?.[5] === 'git-upload-pack' && req.method === 'POST';
  if (!m?.[1] || !m[3] || (!infoRefs && !pack)) return send(res, 404, { reason: 'not_found' });
  authorizeRead(o, cache, req.headers.authorization, m[1], m[3]).then(
    () => serveGit(o.root, req, res, url),
    (e: unknown) => {
      req.resume();
      refuse(o, res, e);
    },
  );
}

export async function startGitServer(o: GitServerOptions): Promise<RunningGitServer> {
  mkdirSync(o.root, { recursive: true, mode: 0o750 });
  const cache = new ReviewCache<true>(o.reviewTtlMs ?? REVIEW_TTL_MS);
  const srv = https.createServer({ cert: o.cert, key: o.key }, (req, res) => route(o, cache, req, res));
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

/**
 * The Git Server run on this host (the demo, e2e specs) as the component runs it: repositories under
 * `dir`/repos, served with `cert`/`key`, trusting `ca` (PEM) for an external repository that is also
 * on `host` (allowed explicitly: a sync refuses internal addresses), every read reviewed by the
 * cluster as `reviewer`.
 */
export function startHostGitServer(o: {
  dir: string;
  cert: Buffer | string;
  key: Buffer | string;
  ca: Buffer | string;
  host: string;
  syncToken: string;
  reviewer: KubeClient;
}): Promise<RunningGitServer> {
  writeFileSync(join(o.dir, 'external-ca.pem'), o.ca);
  return startGitServer({
    root: join(o.dir, 'repos'),
    cert: o.cert,
    key: o.key,
    syncToken: o.syncToken,
    externalCAFile: join(o.dir, 'external-ca.pem'),
    host: o.host,
    authority: kubeGitAuthority(o.reviewer),
    targets: { allow: parseCidrList(`${o.host}/32`), deny: [] },
  });
}

/** The daemon's configuration from its environment (files mounted from Secrets, its own ServiceAccount). */
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
    authority: kubeGitAuthority(defaultClient(env, 'kruntimes-devws-git-server')),
    targets: { allow: parseCidrList(env.KRT_GIT_SYNC_ALLOW), deny: parseCidrList(env.KRT_GIT_SYNC_DENY) },
    ...(env.KRT_GIT_EXTERNAL_CA ? { externalCAFile: env.KRT_GIT_EXTERNAL_CA } : {}),
    port: Number(env.KRT_GIT_PORT ?? '8443'),
  };
}
