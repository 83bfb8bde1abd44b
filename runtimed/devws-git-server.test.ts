/**
 * The Git Server (runtimed/devws-git-server.ts) with real git over real HTTPS: a sync fetches the
 * binding branch of an external repository (a second server) and records a snapshot ref a Node
 * can fetch; refusals have stable reasons; nothing but upload-pack is served.
 */
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCa, issueServing } from '../lib/tls/certs.ts';
import { startGitServer, type RunningGitServer } from './devws-git-server.ts';

const TOKEN = 'sync-token-0123456789';
const BINDING = '1b0e7c1a-5b7c-4a51-9a36-0c0ffee00001';

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

function post(
  url: string,
  ca: string,
  body: unknown,
  token = TOKEN,
): Promise<{ code: number; doc: { ref?: string; commit?: string; reason?: string } }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      `${url}/-/sync`,
      { method: 'POST', ca, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } },
      (res) => {
        let s = '';
        res.on('data', (c: Buffer) => (s += c.toString()));
        res.on('end', () => resolve({ code: res.statusCode ?? 0, doc: JSON.parse(s) as never }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

describe('devws Git Server (git http-backend, sync)', function () {
  this.timeout(30_000);
  let dir: string;
  let ca: string;
  let caFile: string;
  let external: RunningGitServer;
  let server: RunningGitServer;
  let commit: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'krt-devws-git-'));
    const now = new Date();
    const authority = await createCa('test-ca', now, 1);
    const tls = await issueServing(authority, 'localhost', { dns: ['localhost'], ips: ['127.0.0.1'] }, now, 1);
    ca = authority.cert;
    caFile = join(dir, 'ca.pem');
    writeFileSync(caFile, ca);
    // The external repository: branch main with one commit, served by a second instance.
    const work = join(dir, 'work');
    sh(['init', '-q', '-b', 'main', work], dir);
    writeFileSync(join(work, 'README.md'), '# p1\n');
    sh(['add', '.'], work);
    sh(['commit', '-q', '-m', 'c1'], work);
    commit = sh(['rev-parse', 'HEAD'], work);
    sh(['clone', '-q', '--bare', work, join(dir, 'ext', 'o', 'r.git')], dir);
    const common = { ...tls, syncToken: TOKEN, host: '127.0.0.1' };
    external = await startGitServer({ ...common, root: join(dir, 'ext') });
    server = await startGitServer({ ...common, root: join(dir, 'srv'), externalCAFile: caFile });
  });
  after(async () => {
    await external.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const request = (over: object = {}): object => ({
    namespace: 'team',
    project: 'p1',
    bindingId: BINDING,
    url: `${external.url}/o/r.git`,
    branch: 'main',
    ...over,
  });

  it('sync fetches the binding branch and records its snapshot ref, which a Node then fetches over smart HTTP', async () => {
    const r = await post(server.url, ca, request());
    assert.equal(r.code, 200, JSON.stringify(r.doc));
    assert.equal(r.doc.commit, commit);
    assert.equal(r.doc.ref, `refs/ora/upstreams/${BINDING}/snapshots/${commit}`);
    assert.equal((await post(server.url, ca, request())).doc.ref, r.doc.ref, 'a second sync is idempotent');
    const clone = join(dir, 'clone');
    sh(['init', '-q', '-b', 'main', clone], dir);
    // Asynchronously: the server answers from this very process.
    const fetch = ['fetch', '-q', '--no-tags', `${server.url}/team/p1.git`, r.doc.ref ?? ''];
    await promisify(execFile)('git', fetch, {
      cwd: clone,
      timeout: 20_000,
      env: { ...process.env, GIT_SSL_CAINFO: caFile },
    });
    assert.equal(sh(['rev-parse', 'FETCH_HEAD'], clone), commit);
  });

  it('refuses: no token (401), a non-https repository or a bad branch (400 invalid_sync_request), a failed fetch (422 repository_sync_failed)', async () => {
    assert.equal((await post(server.url, ca, request(), 'wrong')).code, 401);
    const file = await post(server.url, ca, request({ url: `file://${join(dir, 'ext', 'o', 'r.git')}` }));
    assert.deepEqual([file.code, file.doc.reason], [400, 'invalid_repository_url']);
    const ssh = await post(server.url, ca, request({ url: 'ssh://git.example/o/r.git' }));
    assert.deepEqual([ssh.code, ssh.doc.reason], [400, 'invalid_sync_request']);
    const branch = await post(server.url, ca, request({ branch: 'HEAD..x' }));
    assert.deepEqual([branch.code, branch.doc.reason], [400, 'invalid_ref']);
    const missing = await post(server.url, ca, request({ branch: 'nope' }));
    assert.deepEqual([missing.code, missing.doc.reason], [422, 'repository_sync_failed']);
  });

  it('serves only upload-pack: receive-pack and other paths are 404', async () => {
    const get = (path: string, method = 'GET'): Promise<number> =>
      new Promise((resolve, reject) => {
        const req = https.request(`${server.url}${path}`, { method, ca }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end();
      });
    assert.equal(await get('/team/p1.git/info/refs?service=git-upload-pack'), 200);
    assert.equal(await get('/team/p1.git/info/refs?service=git-receive-pack'), 404);
    assert.equal(await get('/team/p1.git/git-receive-pack', 'POST'), 404);
    assert.equal(await get('/team/../p1.git/info/refs?service=git-upload-pack'), 404);
    assert.equal(await get('/team/p1.git/config'), 404);
  });
});
