/**
 * functions/devws-sync's I/O half against the real Git Server (runtimed/devws-git-server.ts, real git over
 * real HTTPS): the handler reads the ConfigMap and the token Secret, asks the server, and records
 * the snapshot it made; a refused sync is recorded failed; an unreachable server is asked again.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { D, type Project } from '../lib/devws/api.ts';
import { FakeState } from '../lib/fn/fake-state.ts';
import { R } from '../lib/fn/resources.ts';
import type { Operation as FnOp } from '../lib/fn/types.ts';
import { createCa, issueServing } from '../lib/tls/certs.ts';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { parseCidrList } from '../lib/devws/sync-target.ts';
import type { GitAuthority } from '../runtimed/devws-git-authority.ts';
import { serveGit, startGitServer, type RunningGitServer } from '../runtimed/devws-git-server.ts';
import { handle } from '../functions/devws-sync/index.ts';
import type { CredentialSecret } from '../lib/devws/credential.ts';
import { startTestSshd } from './sshd.ts';

const TOKEN = 'sync-token-for-the-test';

describe('devws-sync against the Git Server (real git over HTTPS)', function () {
  this.timeout(30_000);
  let dir: string;
  let ca: string;
  let external: { url: string; close(): void };
  let current: Project | undefined;
  /** The credentialRef Secrets the namespace granted the Git Server. */
  const secrets = new Map<string, CredentialSecret>();
  /** The Git Server reads the Project it syncs (here: the one the handler was given). */
  const authority: GitAuthority = {
    review: () => Promise.resolve(undefined),
    mayRead: () => Promise.resolve(false),
    workspaces: () => Promise.resolve([]),
    project: () => Promise.resolve(current),
    secret: (_ns, name) => {
      const s = secrets.get(name);
      return Promise.resolve(s ? { secret: s } : { missing: 'not_found' });
    },
  };
  let server: RunningGitServer;
  let commit: string;
  let work: string;
  let gitEnv: NodeJS.ProcessEnv;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'krt-devws-sync-'));
    const now = new Date();
    const testCa = await createCa('test-ca', now, 1);
    const tls = await issueServing(testCa, 'localhost', { dns: ['localhost'], ips: ['127.0.0.1'] }, now, 1);
    ca = testCa.cert;
    writeFileSync(join(dir, 'ca.pem'), ca);
    const env = (gitEnv = {
      ...process.env,
      GIT_AUTHOR_NAME: 't',
      GIT_AUTHOR_EMAIL: 't@x',
      GIT_COMMITTER_NAME: 't',
      GIT_COMMITTER_EMAIL: 't@x',
    });
    work = join(dir, 'work');
    execFileSync('git', ['init', '-q', '-b', 'main', work]);
    writeFileSync(join(work, 'a.txt'), 'a\n');
    execFileSync('git', ['add', '.'], { cwd: work });
    execFileSync('git', ['commit', '-q', '-m', 'a'], { cwd: work, env });
    commit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: work, encoding: 'utf8' }).trim();
    execFileSync('git', ['clone', '-q', '--bare', work, join(dir, 'ext', 'o', 'r.git')]);
    const ext = https.createServer(tls, (req, res) =>
      serveGit(join(dir, 'ext'), req, res, new URL(req.url ?? '/', 'https://x')),
    );
    await new Promise<void>((r) => ext.listen(0, '127.0.0.1', () => r()));
    external = { url: `https://127.0.0.1:${(ext.address() as AddressInfo).port}`, close: () => ext.close() };
    server = await startGitServer({
      ...tls,
      syncToken: TOKEN,
      host: '127.0.0.1',
      root: join(dir, 'srv'),
      externalCAFile: join(dir, 'ca.pem'),
      authority,
      targets: { allow: parseCidrList('127.0.0.1/32'), deny: [] },
    });
  });
  after(async () => {
    external.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const stateFor = (p: Project, url = server.url): FakeState =>
    new FakeState([
      [D.projects, p],
      [
        D.configMaps,
        {
          metadata: { name: 'kruntimes-devws', namespace: 'kruntimes-system' },
          data: { gitServerUrl: url, gitServerCA: ca },
        },
      ],
      [
        R.secrets,
        {
          metadata: { name: 'kruntimes-devws-git-sync', namespace: 'kruntimes-system' },
          data: { token: Buffer.from(TOKEN).toString('base64') },
        },
      ],
    ]);
  const project = (branch: string): Project => ({
    metadata: { name: 'p1', namespace: 'team', uid: 'b-1' },
    spec: { repository: { url: `${external.url}/o/r.git`, defaultBranch: branch } },
    status: { lifecycle: 'provisioning', bindingId: 'b-1', sync: { state: 'running', operationId: 'p1-sync-1' } },
  });
  const written = (ops: FnOp[]): Project['status'] => {
    const w = ops.find((o) => o.op === 'status');
    return w?.op === 'status' ? (w.object as Project).status : undefined;
  };
  const run = async (p: Project, url?: string): Promise<FnOp[]> => {
    current = p;
    return handle({ key: 'team/p1', object: p, state: stateFor(p, url), now: new Date() });
  };

  it('records the snapshot the Git Server made of the binding branch', async () => {
    const st = written(await run(project('main')));
    assert.deepEqual(st?.snapshot, { ref: `refs/ora/upstreams/b-1/snapshots/${commit}`, commit });
    assert.deepEqual(st?.sync, { state: 'succeeded', operationId: 'p1-sync-1' });
  });

  it('a branch the repository does not have fails the sync; an unreachable Git Server is asked again', async () => {
    assert.deepEqual(written(await run(project('nope')))?.sync, { state: 'failed', operationId: 'p1-sync-1' });
    const gone = await run(project('main'), 'https://127.0.0.1:1');
    assert.deepEqual(gone, [{ op: 'requeue', afterMs: 5000 }]);
  });

  it('a Project whose repository is on an internal address fails its sync with the reason (sync_target_forbidden)', async () => {
    const p = project('main');
    p.spec.repository.url = 'https://169.254.169.254/latest/meta-data.git';
    const ops = await run(p);
    assert.deepEqual(written(ops)?.sync, { state: 'failed', operationId: 'p1-sync-1' });
    const event = ops.find((o) => o.op === 'create' && (o.object as { kind?: string }).kind === 'Event');
    assert.match(JSON.stringify(event), /403: sync_target_forbidden/);
  });

  it('an ssh repository (a real sshd): the snapshot synced over ssh is recorded; a host key the credential does not list fails the sync with host_key_unverified in its Event', async () => {
    const sshd = await startTestSshd();
    try {
      const sshAuth = (knownHosts: string): CredentialSecret => ({
        type: 'kubernetes.io/ssh-auth',
        data: {
          'ssh-privatekey': Buffer.from(sshd.userKey).toString('base64'),
          known_hosts: Buffer.from(knownHosts).toString('base64'),
        },
      });
      secrets.set('ssh-ok', sshAuth(sshd.knownHosts));
      secrets.set('ssh-other-host', sshAuth(sshd.wrongKnownHosts));
      const viaSsh = (credentialRef: string): Project => {
        const p = project('main');
        p.spec.repository = { ...p.spec.repository, url: sshd.url(join(dir, 'ext', 'o', 'r.git')), credentialRef };
        return p;
      };
      const st = written(await run(viaSsh('ssh-ok')));
      assert.deepEqual(st?.snapshot, { ref: `refs/ora/upstreams/b-1/snapshots/${commit}`, commit });
      assert.deepEqual(st?.sync, { state: 'succeeded', operationId: 'p1-sync-1' });
      const ops = await run(viaSsh('ssh-other-host'));
      assert.deepEqual(written(ops)?.sync, { state: 'failed', operationId: 'p1-sync-1' });
      const event = ops.find((o) => o.op === 'create' && (o.object as { kind?: string }).kind === 'Event');
      assert.match(JSON.stringify(event), /422: host_key_unverified/);
    } finally {
      await sshd.close();
    }
  });

  it('re-sync: a bumped syncRequests takes a new snapshot of the branch tip; the first snapshot stays on the Git Server', async () => {
    writeFileSync(join(work, 'b.txt'), 'b\n');
    execFileSync('git', ['add', '.'], { cwd: work });
    execFileSync('git', ['commit', '-q', '-m', 'b'], { cwd: work, env: gitEnv });
    execFileSync('git', ['push', '-q', join(dir, 'ext', 'o', 'r.git'), 'main'], { cwd: work });
    const tip = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: work, encoding: 'utf8' }).trim();
    const first = { ref: `refs/ora/upstreams/b-1/snapshots/${commit}`, commit };
    const synced: Project = {
      ...project('main'),
      spec: { ...project('main').spec, syncRequests: 1 },
      status: {
        lifecycle: 'active',
        bindingId: 'b-1',
        snapshot: first,
        sync: { state: 'succeeded', operationId: 'p1-sync-1' },
      },
    };
    const started = written(await run(synced));
    assert.deepEqual(started?.sync, { state: 'running', operationId: 'p1-sync-2', requestsSeen: 1 });
    const st = written(await run({ ...synced, status: started }));
    assert.deepEqual(st?.snapshot, { ref: `refs/ora/upstreams/b-1/snapshots/${tip}`, commit: tip });
    assert.deepEqual(st?.sync, { state: 'succeeded', operationId: 'p1-sync-2', requestsSeen: 1 });
    const refs = execFileSync('git', ['for-each-ref', '--format=%(refname)', 'refs/ora/upstreams/b-1/snapshots/'], {
      cwd: join(dir, 'srv', 'team', 'p1.git'),
      encoding: 'utf8',
    });
    assert.deepEqual(
      refs.trim().split('\n').sort(),
      [first.ref, st?.snapshot?.ref].sort(),
      'both snapshots are served',
    );
    assert.deepEqual(written(await run({ ...synced, status: st })), undefined, 'nothing more until asked again');
  });

  it("a deleted Project's repository is removed from the Git Server", async () => {
    assert.ok(written(await run(project('main')))?.snapshot);
    const repo = join(dir, 'srv', 'team', 'p1.git');
    assert.ok(existsSync(repo));
    current = undefined;
    const ops = await handle({ key: 'team/p1', object: undefined, state: stateFor(project('main')), now: new Date() });
    assert.deepEqual([ops, existsSync(repo)], [[], false]);
  });
});
