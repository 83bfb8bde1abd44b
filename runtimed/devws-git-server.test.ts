/**
 * The Git Server (runtimed/devws-git-server.ts) with real git over real HTTPS: a sync fetches the
 * binding branch of the Project's repository (a second server) and records a snapshot ref a Node
 * then clones with its token; refusals have stable reasons; nothing but upload-pack is served.
 * The Kubernetes answers (TokenReview, SubjectAccessReview, Workspaces, Projects) come from an
 * injected authority (runtimed/devws-git-authority.ts asks the real API; the devws e2e runs it).
 * The attack specs (ADR 0026) fail on the server before it: it served every repository to anyone
 * and fetched whatever URL the request named.
 */
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Project, Workspace } from '../lib/devws/api.ts';
import type { GitAccessError, Identity } from '../lib/devws/git-access.ts';
import type { CredentialSecret, SecretRead } from '../lib/devws/credential.ts';
import { parseCidrList } from '../lib/devws/sync-target.ts';
import { createCa, issueServing } from '../lib/tls/certs.ts';
import type { GitAuthority } from './devws-git-authority.ts';
import { serveGit, sshUser, startGitServer, type GitServerOptions, type RunningGitServer } from './devws-git-server.ts';
import pino from 'pino';
import { cloneOnce, runClone, type NodeConfig } from './devws-node.ts';
import { startTestSshd } from '../e2e/sshd.ts';
import type { GitServerAsUserConfig } from './testdata/git-server-as-user.ts';

const TOKEN = 'sync-token-0123456789';
const BINDING = '1b0e7c1a-5b7c-4a51-9a36-0c0ffee00001';
const NODE_A = 'node-token-of-p1-sandbox';
const NODE_B = 'node-token-of-p2-sandbox';
const NODE_OTHER_NS = 'node-token-of-other-namespace';
const READER = 'token-of-a-reader';
const STRANGER = 'token-of-a-stranger';

function sh(args: string[], cwd: string): string {
  const env = {
    ...process.env,
    GIT_AUTHOR_NAME: 't',
    GIT_AUTHOR_EMAIL: 't@x',
    GIT_COMMITTER_NAME: 't',
    GIT_COMMITTER_EMAIL: 't@x',
  };
  return execFileSync('git', args, { cwd, encoding: 'utf8', env }).trim();
}

type Answer = {
  code: number;
  doc: { ref?: string; commit?: string; reason?: string; message?: string; removed?: boolean };
};

function call(url: string, ca: string, opts: { method?: string; token?: string; body?: unknown }): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    const req = https.request(url, { method: opts.method ?? 'GET', ca, headers }, (res) => {
      let s = '';
      res.on('data', (c: Buffer) => (s += c.toString()));
      res.on('end', () => {
        let doc = {};
        try {
          doc = JSON.parse(s) as object;
        } catch {
          // git's own answer
        }
        resolve({ code: res.statusCode ?? 0, doc });
      });
    });
    req.on('error', reject);
    req.end(opts.body === undefined ? undefined : JSON.stringify(opts.body));
  });
}

const node = (ns: string, pod: string): Identity => ({
  username: `system:serviceaccount:${ns}:kruntimes-devws-node`,
  extra: { 'authentication.kubernetes.io/pod-name': [pod] },
});

const workspace = (name: string, project: string, sandbox: string, terminated = false): Workspace => ({
  metadata: { name, namespace: 'team' },
  spec: { project, kind: 'main', desiredState: 'running' },
  status: { observedState: 'ready', sandbox: { id: sandbox, generation: 1, nodeId: `${sandbox}-node`, terminated } },
});

/** The Kubernetes answers of the tests, counted; `down` makes every question fail as an unreachable API would. */
class TestAuthority implements GitAuthority {
  reviews = 0;
  down = false;
  projects = new Map<string, Project>();
  tokens = new Map<string, Identity>([
    [NODE_A, node('team', 'p1-sandbox')],
    [NODE_B, node('team', 'p2-sandbox')],
    [NODE_OTHER_NS, node('other', 'p1-sandbox')],
    [READER, { username: 'alice', groups: ['devs'] }],
    [STRANGER, { username: 'mallory', groups: ['devs'] }],
  ]);
  spaces = [workspace('p1-main', 'p1', 'p1-sandbox'), workspace('p2-main', 'p2', 'p2-sandbox')];

  private up(): void {
    if (this.down) throw new Error('connect ECONNREFUSED (the API server)');
  }
  async review(token: string): Promise<Identity | undefined> {
    this.up();
    this.reviews++;
    return Promise.resolve(this.tokens.get(token));
  }
  async mayRead(id: Identity, namespace: string, project: string): Promise<boolean> {
    this.up();
    return Promise.resolve(id.username === 'alice' && namespace === 'team' && project === 'p1');
  }
  async workspaces(namespace: string): Promise<Workspace[]> {
    this.up();
    return Promise.resolve(this.spaces.filter((w) => w.metadata.namespace === namespace));
  }
  async project(namespace: string, name: string): Promise<Project | undefined> {
    this.up();
    return Promise.resolve(this.projects.get(`${namespace}/${name}`));
  }
  /** Secrets the namespace granted the Git Server (`forbidden`: one it exists but was not granted). */
  secrets = new Map<string, CredentialSecret | 'forbidden'>();
  async secret(namespace: string, name: string): Promise<SecretRead> {
    this.up();
    const s = this.secrets.get(`${namespace}/${name}`);
    if (s === 'forbidden') return Promise.resolve({ missing: 'forbidden' });
    return Promise.resolve(s ? { secret: s } : { missing: 'not_found' });
  }
}

describe('devws Git Server (git http-backend, sync, authentication)', function () {
  this.timeout(30_000);
  let dir: string;
  let ca: string;
  let caFile: string;
  let tls: { cert: string; key: string };
  let authority: TestAuthority;
  const servers: { close(): unknown }[] = [];
  let external: string;
  let server: RunningGitServer;
  let commit: string;

  /** A plain smart-HTTP server of the external repositories (no authentication), on 127.0.0.1. */
  async function externalServer(root: string, host = '127.0.0.1'): Promise<string> {
    const srv = https.createServer(tls, (req, res) => serveGit(root, req, res, new URL(req.url ?? '/', 'https://x')));
    await new Promise<void>((r) => srv.listen(0, host, () => r()));
    servers.push(srv);
    return `https://${host}:${(srv.address() as AddressInfo).port}`;
  }

  const project = (name: string, url: string, lifecycle: 'active' | 'deleted' = 'active'): Project => ({
    metadata: { name, namespace: 'team', uid: BINDING },
    spec: { repository: { url, defaultBranch: 'main' } },
    status: { lifecycle, bindingId: BINDING },
  });

  async function gitServer(over: Partial<GitServerOptions> = {}): Promise<RunningGitServer> {
    const s = await startGitServer({
      ...tls,
      syncToken: TOKEN,
      host: '127.0.0.1',
      root: join(dir, 'srv'),
      externalCAFile: caFile,
      authority,
      // The external test repositories live on 127.0.0.1: allowed explicitly, as the e2e does.
      targets: { allow: parseCidrList('127.0.0.1/32'), deny: [] },
      ...over,
    });
    servers.push(s);
    return s;
  }

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'krt-devws-git-'));
    const now = new Date();
    const authority0 = await createCa('test-ca', now, 1);
    const serving = await issueServing(
      authority0,
      'localhost',
      { dns: ['localhost'], ips: ['127.0.0.1', '127.0.0.2'] },
      now,
      1,
    );
    tls = { cert: serving.cert, key: serving.key };
    ca = authority0.cert;
    caFile = join(dir, 'ca.pem');
    writeFileSync(caFile, ca);
    const work = join(dir, 'work');
    sh(['init', '-q', '-b', 'main', work], dir);
    writeFileSync(join(work, 'README.md'), '# p1\n');
    sh(['add', '.'], work);
    sh(['commit', '-q', '-m', 'c1'], work);
    commit = sh(['rev-parse', 'HEAD'], work);
    sh(['clone', '-q', '--bare', work, join(dir, 'ext', 'o', 'r.git')], dir);
    sh(['clone', '-q', '--bare', work, join(dir, 'ext', 'o', 'other.git')], dir);
    external = await externalServer(join(dir, 'ext'));
    authority = new TestAuthority();
    authority.projects.set('team/p1', project('p1', `${external}/o/r.git`));
    authority.projects.set('team/p2', project('p2', `${external}/o/other.git`));
    server = await gitServer();
  });
  after(async () => {
    for (const s of servers) await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const sync = (body: object, token = TOKEN, url = server.url): Promise<Answer> =>
    call(`${url}/-/sync`, ca, { method: 'POST', token, body: { namespace: 'team', project: 'p1', ...body } });
  const infoRefs = (project: string, token?: string, ns = 'team'): Promise<Answer> =>
    call(`${server.url}/${ns}/${project}.git/info/refs?service=git-upload-pack`, ca, token ? { token } : {});

  it("sync fetches the Project's binding branch and records its snapshot ref; the Node clones it with its token, which lands nowhere", async () => {
    const r = await sync({ bindingId: BINDING, url: `${external}/o/r.git`, branch: 'main' });
    assert.equal(r.code, 200, JSON.stringify(r.doc));
    assert.equal(r.doc.commit, commit);
    assert.equal(r.doc.ref, `refs/ora/upstreams/${BINDING}/snapshots/${commit}`);
    assert.equal((await sync({})).doc.ref, r.doc.ref, 'a second sync (naming only the Project) is idempotent');
    assert.equal((await sync({ project: 'p2' })).code, 200);
    const home = join(dir, 'home');
    const tokenFile = join(dir, 'git-token');
    writeFileSync(tokenFile, `${NODE_A}\n`);
    const cfg: NodeConfig = {
      namespace: 'team',
      workspace: 'p1-main',
      self: { nodeId: 'n', incarnation: 'i', sandboxId: 'p1-sandbox', generation: 1 },
      home,
      gitCA: ca,
      gitTokenFile: tokenFile,
      pollMs: 1000,
    };
    const input = {
      repositoryUrl: `${server.url}/team/p1.git`,
      snapshotRef: r.doc.ref ?? '',
      baseCommit: commit,
      workspaceBranch: 'refs/heads/workspaces/p1-main/main',
    };
    // Asynchronously: the server answers from this very process.
    const done = await runClone(cfg, {
      kind: 'clone',
      operation: 'op',
      attempt: 0,
      input,
      localBranch: 'main',
      base: {} as never,
    });
    assert.equal(done.commit, commit);
    const config = readFileSync(join(home, 'src', '.git', 'config'), 'utf8');
    assert.ok(!config.includes(NODE_A), 'the token is not in .git/config');
    assert.ok(!JSON.stringify(done).includes(NODE_A), 'nor in the report');
    writeFileSync(tokenFile, NODE_B);
    await assert.rejects(
      runClone(cfg, { kind: 'clone', operation: 'op', attempt: 1, input, localBranch: 'main', base: {} as never }),
      (err: Error) => /403/.test(err.message) && !err.message.includes(NODE_B),
      "p2's Node may not clone p1; the error names no token",
    );
  });

  it('the Node trusts the CA its clone dispatch carries (configured or rotated after its sandbox started), and says why a clone failed', async () => {
    const r = await sync({ bindingId: BINDING, url: `${external}/o/r.git`, branch: 'main' });
    const tokenFile = join(dir, 'git-token-ca');
    writeFileSync(tokenFile, NODE_A);
    const self = { nodeId: 'n', incarnation: 'i', sandboxId: 'p1-sandbox', generation: 1 };
    const home = join(dir, 'home-ca');
    // No CA of its own (the sandbox was created before one was configured): the system's trust.
    const cfg: NodeConfig = { namespace: 'team', workspace: 'p1-main', self, home, gitTokenFile: tokenFile, pollMs: 1 };
    const input = {
      repositoryUrl: `${server.url}/team/p1.git`,
      snapshotRef: r.doc.ref ?? '',
      baseCommit: commit,
      workspaceBranch: 'refs/heads/workspaces/p1-main/main',
    };
    const act = { kind: 'clone' as const, operation: 'op', attempt: 0, input, localBranch: 'main', base: {} as never };
    const untrusted = await cloneOnce(cfg, act, pino({ level: 'silent' }));
    assert.equal(untrusted.result, 'failed');
    assert.match(untrusted.message ?? '', /^git fetch: .*(certificate|SSL)/i, "git's own words");
    const done = await runClone(cfg, { ...act, attempt: 1, ca });
    assert.equal(done.commit, commit);
  });

  it('attack: a clone without a token, or with a token the API does not accept, is refused 401 unauthenticated', async () => {
    const none = await infoRefs('p1');
    assert.deepEqual([none.code, none.doc.reason], [401, 'unauthenticated']);
    const forged = await infoRefs('p1', 'not-a-token');
    assert.deepEqual([forged.code, forged.doc.reason], [401, 'unauthenticated']);
    const pack = await call(`${server.url}/team/p1.git/git-upload-pack`, ca, { method: 'POST' });
    assert.deepEqual([pack.code, pack.doc.reason], [401, 'unauthenticated']);
    const clone = join(dir, 'anon');
    sh(['init', '-q', clone], dir);
    await assert.rejects(
      promisify(execFile)('git', ['fetch', '-q', `${server.url}/team/p1.git`, 'HEAD'], {
        cwd: clone,
        env: { ...process.env, GIT_SSL_CAINFO: caFile, GIT_TERMINAL_PROMPT: '0' },
      }),
      /401|Authentication failed|could not read Username/,
    );
  });

  it("attack: a Node of Project p2's Workspace cannot clone p1; a Node of another namespace cannot clone team/p1; a terminated sandbox's Node cannot", async () => {
    assert.equal((await infoRefs('p1', NODE_A)).code, 200);
    const other = await infoRefs('p1', NODE_B);
    assert.deepEqual([other.code, other.doc.reason], [403, 'repository_forbidden']);
    const ns = await infoRefs('p1', NODE_OTHER_NS);
    assert.deepEqual([ns.code, ns.doc.reason], [403, 'repository_forbidden']);
    const crossNs = await infoRefs('p1', NODE_OTHER_NS, 'other');
    assert.deepEqual([crossNs.code, crossNs.doc.reason], [403, 'repository_forbidden'], 'no Workspace there');
    authority.spaces = [workspace('p1-main', 'p1', 'p1-sandbox', true), workspace('p2-main', 'p2', 'p2-sandbox')];
    authority.tokens.set('fresh-node-a', node('team', 'p1-sandbox'));
    const gone = await infoRefs('p1', 'fresh-node-a');
    authority.spaces = [workspace('p1-main', 'p1', 'p1-sandbox'), workspace('p2-main', 'p2', 'p2-sandbox')];
    assert.deepEqual([gone.code, gone.doc.reason], [403, 'repository_forbidden']);
  });

  it('another identity needs get projects/repository (SubjectAccessReview); an API server that cannot answer refuses 503; allowed answers are cached per token digest', async () => {
    assert.equal((await infoRefs('p1', READER)).code, 200);
    const stranger = await infoRefs('p1', STRANGER);
    assert.deepEqual([stranger.code, stranger.doc.reason], [403, 'repository_forbidden']);
    const reviews = authority.reviews;
    assert.equal((await infoRefs('p1', READER)).code, 200);
    assert.equal(authority.reviews, reviews, 'the allowed answer was remembered');
    authority.down = true;
    try {
      assert.equal((await infoRefs('p1', READER)).code, 200, 'still within the cache window');
      const closed = await infoRefs('p1', STRANGER);
      assert.deepEqual([closed.code, closed.doc.reason], [503, 'authorization_unavailable'], 'fails closed');
    } finally {
      authority.down = false;
    }
    const told: unknown[] = [];
    const brief = await gitServer({ root: join(dir, 'srv'), reviewTtlMs: 0, onError: (err) => told.push(err) });
    const r = await call(`${brief.url}/team/p1.git/info/refs?service=git-upload-pack`, ca, { token: READER });
    assert.equal(r.code, 200);
    authority.down = true;
    try {
      const again = await call(`${brief.url}/team/p1.git/info/refs?service=git-upload-pack`, ca, { token: READER });
      assert.deepEqual(
        [again.code, again.doc.reason],
        [503, 'authorization_unavailable'],
        'nothing cached: asked again',
      );
      assert.match(
        String(told[0]),
        /authorization_unavailable: TokenReview: connect ECONNREFUSED/,
        'the operator is told',
      );
    } finally {
      authority.down = false;
    }
  });

  it('attack: only the sync token triggers a sync (a Node token is 401 and fetches nothing)', async () => {
    const before = sh(['for-each-ref', '--format=%(refname)'], join(dir, 'srv', 'team', 'p1.git'));
    for (const token of [NODE_A, READER, 'wrong']) {
      const r = await sync({ project: 'p3' }, token);
      assert.deepEqual([r.code, r.doc.reason], [401, 'unauthenticated'], token);
    }
    assert.equal(sh(['for-each-ref', '--format=%(refname)'], join(dir, 'srv', 'team', 'p1.git')), before);
  });

  it("attack: a sync fetches only the Project's own repository (sync_target_mismatch), never a missing or deleted Project", async () => {
    const elsewhere = await sync({ url: `${external}/o/other.git` });
    assert.deepEqual([elsewhere.code, elsewhere.doc.reason], [409, 'sync_target_mismatch']);
    const branch = await sync({ branch: 'dev' });
    assert.deepEqual([branch.code, branch.doc.reason], [409, 'sync_target_mismatch']);
    const binding = await sync({ bindingId: 'another-binding' });
    assert.deepEqual([binding.code, binding.doc.reason], [409, 'sync_target_mismatch']);
    const missing = await sync({ project: 'p9' });
    assert.deepEqual([missing.code, missing.doc.reason], [404, 'project_not_found']);
    authority.projects.set('team/p8', project('p8', `${external}/o/r.git`, 'deleted'));
    const deleted = await sync({ project: 'p8' });
    assert.deepEqual([deleted.code, deleted.doc.reason], [409, 'project_not_syncable']);
  });

  it('attack: a Project whose repository is on loopback, link-local (metadata) or a private address is refused sync_target_forbidden unless allow-listed', async () => {
    const strict = await gitServer({
      targets: { allow: [], deny: parseCidrList('203.0.113.0/24') },
      resolve: (host) =>
        Promise.resolve(
          ({ 'metadata.internal': ['169.254.169.254'], 'mixed.example': ['198.51.100.7', '10.0.0.1'] } as never)[
            host
          ] ?? ['198.51.100.7'],
        ),
    });
    const attempt = async (url: string): Promise<Answer> => {
      authority.projects.set('team/px', project('px', url));
      return sync({ project: 'px' }, TOKEN, strict.url);
    };
    for (const url of [
      `${external}/o/r.git`,
      'https://169.254.169.254/latest/meta-data.git',
      'https://metadata.internal/o/r.git',
      'https://mixed.example/o/r.git',
      'https://[::1]/o/r.git',
      'https://[::ffff:127.0.0.1]/o/r.git',
      'https://10.96.0.1/o/r.git',
      'https://203.0.113.9/o/r.git',
    ]) {
      const r = await attempt(url);
      assert.deepEqual([r.code, r.doc.reason], [403, 'sync_target_forbidden'], `${url}: ${r.doc.message ?? ''}`);
    }
    authority.projects.set('team/px', project('px', `${external}/o/r.git`));
    assert.equal((await sync({ project: 'px' })).code, 200, 'the allow-listed 127.0.0.1 is fetched');
  });

  it('a sync follows no redirect (it would lead past the address check)', async () => {
    // An allow-listed host that redirects to a repository on a denied address (127.0.0.2).
    const denied = await externalServer(join(dir, 'ext'), '127.0.0.2');
    const redirector = https.createServer(tls, (req, res) => {
      res.writeHead(302, { location: `${denied}${req.url ?? '/'}` });
      res.end();
    });
    await new Promise<void>((r) => redirector.listen(0, '127.0.0.1', () => r()));
    servers.push(redirector);
    authority.projects.set(
      'team/pr',
      project('pr', `https://127.0.0.1:${(redirector.address() as AddressInfo).port}/o/r.git`),
    );
    const r = await sync({ project: 'pr' });
    assert.deepEqual([r.code, r.doc.reason], [422, 'repository_sync_failed'], JSON.stringify(r.doc));
  });

  it('refuses: a bad request (400 invalid_sync_request), a failed fetch (422 repository_sync_failed)', async () => {
    const bad = await sync({ namespace: 'Not_A_Label' });
    assert.deepEqual([bad.code, bad.doc.reason], [400, 'invalid_sync_request']);
    authority.projects.set('team/pn', {
      ...project('pn', `${external}/o/r.git`),
      spec: { repository: { url: `${external}/o/r.git`, defaultBranch: 'nope' } },
    });
    const missing = await sync({ project: 'pn' });
    assert.deepEqual([missing.code, missing.doc.reason], [422, 'repository_sync_failed']);
  });

  it("credentialRef: a private https repository is fetched with the Project's basic-auth Secret, sent only as a header; a missing, ungranted or unusable Secret fails with its reason", async () => {
    const PASSWORD = 'tok-0123456789-secret';
    const expected = `Basic ${Buffer.from(`bot:${PASSWORD}`).toString('base64')}`;
    const seen: string[] = [];
    const privateRepo = https.createServer(tls, (req, res) => {
      seen.push(`${req.url ?? ''} ${req.headers.authorization === expected ? 'auth' : 'none'}`);
      if (req.headers.authorization !== expected) {
        res.writeHead(401, { 'www-authenticate': 'Basic realm="private"' });
        res.end();
        return;
      }
      serveGit(join(dir, 'ext'), req, res, new URL(req.url ?? '/', 'https://x'));
    });
    await new Promise<void>((r) => privateRepo.listen(0, '127.0.0.1', () => r()));
    servers.push(privateRepo);
    const url = `https://127.0.0.1:${(privateRepo.address() as AddressInfo).port}/o/r.git`;
    const withRef = (name: string, credentialRef?: string): Project => ({
      ...project(name, url),
      spec: { repository: { url, defaultBranch: 'main', ...(credentialRef ? { credentialRef } : {}) } },
    });
    const basic = (password: string, type = 'kubernetes.io/basic-auth'): CredentialSecret => ({
      type,
      data: { username: Buffer.from('bot').toString('base64'), password: Buffer.from(password).toString('base64') },
    });
    authority.secrets.set('team/repo-cred', basic(PASSWORD));
    authority.projects.set('team/pc', withRef('pc', 'repo-cred'));
    const ok = await sync({ project: 'pc' });
    assert.deepEqual([ok.code, ok.doc.commit], [200, commit], JSON.stringify(ok.doc));
    assert.ok(seen.length > 0 && seen.every((l) => l.endsWith(' auth')), 'every request carried the credential');
    const repo = join(dir, 'srv', 'team', 'pc.git');
    const onDisk = sh(['config', '--list'], repo) + readFileSync(join(repo, 'config'), 'utf8');
    assert.ok(
      !onDisk.includes(PASSWORD) && !onDisk.includes(expected.slice(6)),
      'the credential is not in the repository',
    );
    const refused = async (name: string, reason: string): Promise<string> => {
      const r = await sync({ project: name });
      assert.deepEqual([r.code, r.doc.reason], [422, reason], JSON.stringify(r.doc));
      assert.ok(!JSON.stringify(r.doc).includes(PASSWORD), 'no answer carries the credential');
      return r.doc.message ?? '';
    };
    authority.projects.set('team/pn1', withRef('pn1'));
    await refused('pn1', 'repository_sync_failed'); // the repository is private: without the credential, nothing
    authority.secrets.set('team/wrong', basic('not-it'));
    authority.projects.set('team/pn2', withRef('pn2', 'wrong'));
    await refused('pn2', 'credential_refused');
    authority.projects.set('team/pn3', withRef('pn3', 'absent'));
    assert.match(await refused('pn3', 'credential_not_found'), /team\/absent does not exist/);
    authority.secrets.set('team/hidden', 'forbidden');
    authority.projects.set('team/pn4', withRef('pn4', 'hidden'));
    assert.match(await refused('pn4', 'credential_forbidden'), /grant its ServiceAccount get on that Secret/);
    authority.secrets.set('team/opaque', basic(PASSWORD, 'Opaque'));
    authority.projects.set('team/pn5', withRef('pn5', 'opaque'));
    await refused('pn5', 'credential_invalid');
  });

  it("ssh: a repository on a real sshd is fetched with the Project's ssh-auth Secret, host key checked against its known_hosts, the key in no command line, file or answer that outlives the fetch", async () => {
    const sshd = await startTestSshd();
    servers.push(sshd);
    const url = sshd.url(join(dir, 'ext', 'o', 'r.git'));
    const sshAuth = (key: string, knownHosts?: string, type = 'kubernetes.io/ssh-auth'): CredentialSecret => ({
      type,
      data: {
        'ssh-privatekey': Buffer.from(key).toString('base64'),
        ...(knownHosts === undefined ? {} : { known_hosts: Buffer.from(knownHosts).toString('base64') }),
      },
    });
    const withSsh = (name: string, repo: string, credentialRef?: string): Project => ({
      ...project(name, repo),
      spec: { repository: { url: repo, defaultBranch: 'main', ...(credentialRef ? { credentialRef } : {}) } },
    });
    const keyBody = sshd.userKey.split('\n')[1] ?? '';
    const scratch = (): string[] => readdirSync(tmpdir()).filter((f) => f.startsWith('krt-git-ssh-'));
    const before = scratch();
    const server2 = await gitServer();
    const sync2 = (project: string): Promise<Answer> =>
      call(`${server2.url}/-/sync`, ca, { method: 'POST', token: TOKEN, body: { namespace: 'team', project } });
    authority.secrets.set('team/ssh-cred', sshAuth(sshd.userKey, sshd.knownHosts));
    authority.projects.set('team/ps', withSsh('ps', url, 'ssh-cred'));
    const ok = await sync2('ps');
    assert.deepEqual([ok.code, ok.doc.commit], [200, commit], JSON.stringify(ok.doc));
    const repo = join(dir, 'srv', 'team', 'ps.git');
    assert.equal(sh(['rev-parse', `refs/ora/upstreams/${BINDING}/snapshots/${commit}`], repo), commit);
    const onDisk = sh(['config', '--list'], repo) + readFileSync(join(repo, 'config'), 'utf8');
    assert.ok(!onDisk.includes(keyBody) && !onDisk.includes('ssh'), 'nothing of the credential in the repository');
    assert.deepEqual(scratch(), before, "the key's files are removed after the fetch");
    const refused = async (name: string, reason: string): Promise<string> => {
      const r = await sync2(name);
      assert.deepEqual([r.code, r.doc.reason], [422, reason], JSON.stringify(r.doc));
      assert.ok(!JSON.stringify(r.doc).includes(keyBody), 'no answer carries the key');
      return r.doc.message ?? '';
    };
    authority.projects.set('team/ps1', withSsh('ps1', url));
    assert.match(await refused('ps1', 'credential_required'), /ssh-auth with ssh-privatekey and known_hosts/);
    authority.secrets.set('team/ssh-nohosts', sshAuth(sshd.userKey));
    authority.projects.set('team/ps2', withSsh('ps2', url, 'ssh-nohosts'));
    assert.match(await refused('ps2', 'credential_invalid'), /has no known_hosts/);
    authority.secrets.set('team/ssh-basic', sshAuth(sshd.userKey, sshd.knownHosts, 'kubernetes.io/basic-auth'));
    authority.projects.set('team/ps3', withSsh('ps3', url, 'ssh-basic'));
    assert.match(await refused('ps3', 'credential_invalid'), /must be of type kubernetes.io\/ssh-auth/);
    authority.secrets.set('team/ssh-otherhost', sshAuth(sshd.userKey, sshd.wrongKnownHosts));
    authority.projects.set('team/ps4', withSsh('ps4', url, 'ssh-otherhost'));
    assert.match(await refused('ps4', 'host_key_unverified'), /not in the credential's known_hosts/);
    authority.secrets.set('team/ssh-otherkey', sshAuth(sshd.otherKey, sshd.knownHosts));
    authority.projects.set('team/ps5', withSsh('ps5', url, 'ssh-otherkey'));
    assert.match(await refused('ps5', 'credential_refused'), /Permission denied/);
    // The accepted key, protected with a passphrase: refused before any fetch, with its own reason.
    const locked = join(dir, 'locked-key');
    writeFileSync(locked, sshd.userKey, { mode: 0o600 });
    execFileSync('ssh-keygen', ['-q', '-p', '-P', '', '-N', 'secret', '-f', locked]);
    authority.secrets.set('team/ssh-locked', sshAuth(readFileSync(locked, 'utf8'), sshd.knownHosts));
    authority.projects.set('team/ps6', withSsh('ps6', url, 'ssh-locked'));
    assert.match(await refused('ps6', 'credential_passphrase_unsupported'), /passphrase-protected ssh-privatekey/);
    assert.deepEqual(scratch(), before, "the key's files are removed after a failed fetch too");
  });

  it('ssh: a sync running as a uid without a passwd entry (the component as the local environment runs it, uid 65532) fetches through nss_wrapper', async function () {
    this.timeout(30_000);
    assert.equal(process.getuid?.(), 0, 'the test starts the server as another uid (the suite runs as root)');
    const uid = 65532;
    assert.throws(() => execFileSync('getent', ['passwd', String(uid)]), 'the host has no passwd entry for it');
    const sshd = await startTestSshd();
    servers.push(sshd);
    const scratch = mkdtempSync(join(tmpdir(), 'krt-devws-git-uid-'));
    chownSync(scratch, uid, uid);
    const config: GitServerAsUserConfig = {
      root: join(scratch, 'srv'),
      cert: tls.cert.toString(),
      key: tls.key.toString(),
      syncToken: TOKEN,
      allow: '127.0.0.1/32',
      project: {
        ...project('pu', sshd.url(join(dir, 'ext', 'o', 'r.git'))),
        spec: {
          repository: { url: sshd.url(join(dir, 'ext', 'o', 'r.git')), defaultBranch: 'main', credentialRef: 'k' },
        },
      },
      secret: {
        type: 'kubernetes.io/ssh-auth',
        data: {
          'ssh-privatekey': Buffer.from(sshd.userKey).toString('base64'),
          known_hosts: Buffer.from(sshd.knownHosts).toString('base64'),
        },
      },
    };
    writeFileSync(join(scratch, 'config.json'), JSON.stringify(config), { mode: 0o600 });
    chownSync(join(scratch, 'config.json'), uid, uid);
    const setpriv = ['--reuid', String(uid), '--regid', String(uid), '--clear-groups'];
    const child = spawn(
      'setpriv',
      [
        ...setpriv,
        process.execPath,
        '--import',
        'tsx',
        'runtimed/testdata/git-server-as-user.ts',
        join(scratch, 'config.json'),
      ],
      {
        cwd: join(import.meta.dirname, '..'),
        env: { PATH: process.env.PATH ?? '', HOME: '/' },
        stdio: ['pipe', 'pipe', 'inherit'],
      },
    );
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        child.stdout.once('data', (d: Buffer) => resolve((JSON.parse(d.toString()) as { url: string }).url));
        child.once('exit', (code) => reject(new Error(`the server as uid ${uid} exited ${code ?? ''}`)));
      });
      const r = await call(`${url}/-/sync`, ca, {
        method: 'POST',
        token: TOKEN,
        body: { namespace: 'team', project: 'pu' },
      });
      assert.deepEqual([r.code, r.doc.commit], [200, commit], JSON.stringify(r.doc));
    } finally {
      child.stdin.end();
      await exited;
      rmSync(scratch, { recursive: true, force: true });
    }
  });

  it('ssh: the connection is pinned to the vetted address (a name the ssh client could not resolve), the host key looked up under the name; an internal address is refused', async () => {
    const sshd = await startTestSshd();
    servers.push(sshd);
    const name = 'git.example.invalid';
    const url = `ssh://${sshd.user}@${name}:${sshd.port}${join(dir, 'ext', 'o', 'r.git')}`;
    const underName = sshd.knownHosts.replace(`[${sshd.host}]`, `[${name}]`);
    authority.secrets.set('team/ssh-named', {
      type: 'kubernetes.io/ssh-auth',
      data: {
        'ssh-privatekey': Buffer.from(sshd.userKey).toString('base64'),
        known_hosts: Buffer.from(underName).toString('base64'),
      },
    });
    authority.projects.set('team/pp', {
      ...project('pp', url),
      spec: { repository: { url, defaultBranch: 'main', credentialRef: 'ssh-named' } },
    });
    const resolve = (host: string): Promise<string[]> => Promise.resolve(host === name ? [sshd.host] : []);
    const pinned = await gitServer({ resolve });
    const call2 = (s: RunningGitServer): Promise<Answer> =>
      call(`${s.url}/-/sync`, ca, { method: 'POST', token: TOKEN, body: { namespace: 'team', project: 'pp' } });
    const ok = await call2(pinned);
    assert.deepEqual([ok.code, ok.doc.commit], [200, commit], JSON.stringify(ok.doc));
    const strict = await gitServer({ resolve, targets: { allow: [], deny: [] } });
    const no = await call2(strict);
    assert.deepEqual([no.code, no.doc.reason], [403, 'sync_target_forbidden']);
  });

  it("a deleted Project's repository is removed (only with the sync token, never while the Project lives)", async () => {
    authority.projects.set('team/pd', project('pd', `${external}/o/r.git`));
    assert.equal((await sync({ project: 'pd' })).code, 200);
    const repo = join(dir, 'srv', 'team', 'pd.git');
    const remove = (token = TOKEN): Promise<Answer> =>
      call(`${server.url}/-/remove`, ca, { method: 'POST', token, body: { namespace: 'team', project: 'pd' } });
    assert.deepEqual([(await remove()).code, (await remove()).doc.reason], [409, 'project_not_deleted']);
    authority.projects.set('team/pd', project('pd', `${external}/o/r.git`, 'deleted'));
    assert.deepEqual([(await remove(NODE_A)).code, existsSync(repo)], [401, true], 'not without the sync token');
    assert.deepEqual([(await remove()).code, existsSync(repo)], [200, false]);
    authority.projects.delete('team/pd');
    const again = await remove();
    assert.deepEqual([again.code, again.doc], [200, { removed: false }], 'idempotent once gone');
  });

  it('serves only upload-pack: receive-pack and other paths are 404', async () => {
    const get = async (path: string, method = 'GET'): Promise<number> =>
      (await call(`${server.url}${path}`, ca, { method, token: NODE_A })).code;
    assert.equal(await get('/team/p1.git/info/refs?service=git-upload-pack'), 200);
    assert.equal(await get('/team/p1.git/info/refs?service=git-receive-pack'), 404);
    assert.equal(await get('/team/p1.git/git-receive-pack', 'POST'), 404);
    assert.equal(await get('/team/../p1.git/info/refs?service=git-upload-pack'), 404);
    assert.equal(await get('/team/p1.git/config'), 404);
  });
});

describe('devws Git Server: ssh for a uid without a passwd entry (pure)', () => {
  it('writes the passwd and group files and names nss_wrapper; a uid with an entry runs plain ssh; without nss_wrapper the sync says ssh_unavailable', () => {
    const dir = mkdtempSync(join(tmpdir(), 'krt-ssh-user-'));
    try {
      assert.equal(sshUser(dir, { hasEntry: () => true }), undefined, 'a uid with an entry: plain ssh');
      const lib = join(dir, 'libnss_wrapper.so');
      writeFileSync(lib, '');
      const u = sshUser(dir, { hasEntry: () => false, libraries: ['/nonexistent.so', lib], uid: 7, gid: 8 });
      assert.equal(u?.library, lib);
      assert.equal(readFileSync(u?.passwd ?? '', 'utf8'), 'kruntimes:x:7:8:kruntimes:' + dir + ':/usr/sbin/nologin\n');
      assert.throws(
        () => sshUser(dir, { hasEntry: () => false, libraries: [], uid: 7 }),
        (err: GitAccessError) => err.reason === 'ssh_unavailable' && /uid 7: it has no passwd entry/.test(err.message),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
