/**
 * `krt local demo-devws`: developer workspaces end to end on the local environment, from the
 * manifests of examples/devws/ as written (only the repository URL is the demo's own). The local
 * environment has no Git Server and no external repository, so this process runs both where the
 * sandbox Pods reach the host (as the devws e2e does): an "external" repository served over HTTPS,
 * and the Git Server (`kruntimes devws-git-server`'s code) with the component's own ClusterRole;
 * the ConfigMap `kruntimes-devws` and the sync token Secret point the cluster at it while the demo
 * runs. Then: create_project (the sync, the Node's clone), stop and start (no re-clone), the
 * external repository moves on and is re-synced, an isolated Workspace clones the new snapshot,
 * and delete_project removes everything. The demo's configuration is removed at the end.
 */
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { Operation, Project, Workspace } from '../../lib/devws/api.ts';
import type { KubeClient } from '../../lib/kube/client.ts';
import { isApiError } from '../../lib/kube/errors.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { createCa, issueServing } from '../../lib/tls/certs.ts';
import { REPO_ROOT } from '../../localenv/paths.ts';
import { serveGit, startHostGitServer } from '../../runtimed/devws-git-server.ts';
import { syncProgress, syncRequested, waitOperation } from '../devws/commands.ts';

const SYS = 'kruntimes-system';
const G = '/apis/dev.kruntimes.io/v1alpha1';
const RBAC = '/apis/rbac.authorization.k8s.io/v1';
const CONFIG = `/api/v1/namespaces/${SYS}/configmaps/kruntimes-devws`;
const SYNC_SECRET = `/api/v1/namespaces/${SYS}/secrets/kruntimes-devws-git-sync`;
/** Marks the configuration the demo wrote (it never replaces an installation's own). */
const MANAGED = { 'app.kubernetes.io/managed-by': 'krt-local-demo-devws' };

export interface DevwsDemoOptions {
  admin: KubeClient;
  /** Where the sandbox Pods reach this host (127.0.0.1 on the node agent). */
  host: string;
  say: (m: string) => void;
  /** The namespace to run in (default: kruntimes-devws-demo-<random>). */
  namespace?: string;
}

export interface DevwsDemoResult {
  namespace: string;
  /** The commit the main Workspace cloned, and the one the isolated Workspace cloned after the re-sync. */
  mainCommit: string;
  taskCommit: string;
  /** Each Operation's steps, by name. */
  steps: Record<string, string[]>;
}

interface DemoGit {
  repositoryUrl: string;
  commit: string;
  push(files: Record<string, string>): string;
  close(): Promise<void>;
}

const gitEnv = {
  ...process.env,
  GIT_AUTHOR_NAME: 'demo',
  GIT_AUTHOR_EMAIL: 'demo@example.invalid',
  GIT_COMMITTER_NAME: 'demo',
  GIT_COMMITTER_EMAIL: 'demo@example.invalid',
};
const git = (args: string[], cwd: string): string =>
  execFileSync('git', args, { cwd, encoding: 'utf8', env: gitEnv }).trim();

function commitFiles(work: string, files: Record<string, string>): string {
  for (const [name, body] of Object.entries(files)) writeFileSync(join(work, name), body);
  git(['add', '.'], work);
  git(['commit', '-q', '-m', `demo: ${Object.keys(files).join(', ')}`], work);
  return git(['rev-parse', 'HEAD'], work);
}

/** The demo's "external" repository: a working copy and its bare repository, served over HTTPS. */
async function externalRepository(
  dir: string,
  tls: { cert: string; key: string },
  host: string,
): Promise<Omit<DemoGit, 'close'> & { close(): void }> {
  const work = join(dir, 'work');
  git(['init', '-q', '-b', 'main', work], dir);
  const commit = commitFiles(work, { 'README.md': '# demo\n\nA developer-workspace demo repository.\n' });
  git(['clone', '-q', '--bare', work, join(dir, 'ext', 'demo.git')], dir);
  const srv = https.createServer(tls, (req, res) =>
    serveGit(join(dir, 'ext'), req, res, new URL(req.url ?? '/', 'https://x')),
  );
  await new Promise<void>((r) => srv.listen(0, host, () => r()));
  const url = `https://${host}:${(srv.address() as AddressInfo).port}/demo.git`;
  const push = (files: Record<string, string>): string => {
    const next = commitFiles(work, files);
    git(['push', '-q', join(dir, 'ext', 'demo.git'), 'main'], work);
    return next;
  };
  return { repositoryUrl: url, commit, push, close: () => srv.close() };
}

/** Creates an object, or replaces the content of the one an earlier run left. */
async function upsert(admin: KubeClient, collection: string, path: string, body: KubeObject): Promise<void> {
  await admin.create(collection, body).catch(async (err: unknown) => {
    if (!isApiError(err, 409)) throw err;
    await admin.patch(path, body);
  });
}

/**
 * The Git Server's API identity as the component ships it: its ClusterRole (read from
 * kustomize/components/devws-git-server) bound to its ServiceAccount; a 1 h token of it.
 */
async function gitServerIdentity(admin: KubeClient): Promise<KubeClient> {
  const file = readFileSync(join(REPO_ROOT, 'kustomize/components/devws-git-server/git-server.yaml'), 'utf8');
  const docs = parseAllDocuments(file).map((d) => d.toJSON() as KubeObject);
  const kinds = ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding'];
  for (const doc of docs.filter((d) => kinds.includes(d.kind ?? ''))) {
    const name = doc.metadata.name ?? '';
    const collection =
      doc.kind === 'ServiceAccount'
        ? `/api/v1/namespaces/${SYS}/serviceaccounts`
        : `${RBAC}/${(doc.kind ?? '').toLowerCase()}s`;
    await upsert(admin, collection, `${collection}/${name}`, doc);
  }
  const tr = await admin.create<KubeObject & { status: { token: string } }>(
    `/api/v1/namespaces/${SYS}/serviceaccounts/kruntimes-devws-git/token`,
    { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } },
  );
  return admin.withToken(tr.status.token);
}

/** Refuses to replace a Git Server configuration the demo did not write. */
async function assertNotConfigured(admin: KubeClient): Promise<void> {
  const cm = await admin.get<KubeObject>(CONFIG).catch((err: unknown) => {
    if (isApiError(err, 404)) return undefined;
    throw err;
  });
  if (cm && cm.metadata.labels?.['app.kubernetes.io/managed-by'] !== MANAGED['app.kubernetes.io/managed-by'])
    throw new Error(`demo-devws: ${CONFIG} configures a Git Server already; the demo does not replace it`);
}

/** Starts the repository and the Git Server on this host and points the cluster at them. */
async function startGit(admin: KubeClient, host: string): Promise<DemoGit> {
  await assertNotConfigured(admin);
  const dir = mkdtempSync(join(tmpdir(), 'krt-devws-demo-'));
  const now = new Date();
  const ca = await createCa('krt-devws-demo', now, 1);
  const tls = await issueServing(ca, host, { dns: ['localhost'], ips: [host] }, now, 1);
  const external = await externalRepository(dir, tls, host);
  const token = randomBytes(24).toString('hex');
  const reviewer = await gitServerIdentity(admin);
  const server = await startHostGitServer({
    dir,
    cert: tls.cert,
    key: tls.key,
    ca: ca.cert,
    host,
    syncToken: token,
    reviewer,
  });
  const labels = MANAGED;
  const secret = { metadata: { name: 'kruntimes-devws-git-sync', labels }, stringData: { token } };
  await upsert(admin, `/api/v1/namespaces/${SYS}/secrets`, SYNC_SECRET, secret);
  const data = { gitServerUrl: server.url, gitServerCA: ca.cert };
  await upsert(admin, `/api/v1/namespaces/${SYS}/configmaps`, CONFIG, {
    metadata: { name: 'kruntimes-devws', labels },
    data,
  });
  return {
    ...external,
    close: async () => {
      for (const path of [CONFIG, SYNC_SECRET]) await admin.delete(path).catch(() => undefined);
      external.close();
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The documents of an examples/devws file, by kind. */
function example(file: string): Map<string, KubeObject & { spec?: Record<string, unknown> }> {
  const text = readFileSync(join(REPO_ROOT, 'examples', 'devws', file), 'utf8');
  const docs = parseAllDocuments(text).map((d) => d.toJSON() as KubeObject);
  return new Map(docs.map((d) => [d.kind ?? '', d]));
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 180_000): Promise<T> {
  const start = Date.now();
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() - start > timeoutMs) throw new Error(`demo-devws: timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

interface Ctx {
  o: DevwsDemoOptions;
  ns: string;
  steps: Record<string, string[]>;
}

const path = (c: Ctx, plural: string, name = ''): string =>
  `${G}/namespaces/${c.ns}/${plural}${name ? `/${name}` : ''}`;

/** Follows an Operation (created by the demo or by the controller) to success, one progress line per step. */
async function follow(c: Ctx, name: string): Promise<Operation> {
  await until(`Operation ${name}`, () => c.o.admin.get(path(c, 'operations', name)));
  const done = await waitOperation({ client: c.o.admin, namespace: c.ns }, name, (l) => c.o.say(l.trimEnd()), 300);
  c.steps[name] = done.status?.steps ?? [];
  return done;
}

async function workspace(c: Ctx, name: string): Promise<Workspace> {
  return c.o.admin.get<Workspace>(path(c, 'workspaces', name));
}

/** Re-sync (as `krt project sync demo --wait`): the snapshot of the new tip. */
async function resync(c: Ctx, tip: string): Promise<void> {
  const next = syncRequested(await c.o.admin.get<Project>(path(c, 'projects', 'demo')));
  await c.o.admin.replace(path(c, 'projects', 'demo'), next);
  const done = await until('the re-sync', async () => {
    const got = syncProgress(await c.o.admin.get<Project>(path(c, 'projects', 'demo')), next.spec.syncRequests ?? 0);
    return got?.ended ? got : undefined;
  });
  c.o.say(`demo-devws: ${done.line}`);
  if (!done.line.includes(`snapshot ${tip.slice(0, 12)}`))
    throw new Error(`demo-devws: the re-sync ended ${done.line}`);
}

const API_VERSION = 'dev.kruntimes.io/v1alpha1';
const operation = (name: string, kind: Operation['spec']['kind'], workspace?: string): Operation => ({
  apiVersion: API_VERSION,
  kind: 'Operation',
  metadata: { name },
  spec: { project: 'demo', kind, ...(workspace ? { workspace } : {}) },
});

/** examples/devws/project.yaml's Project (its repository: the demo's), then its create_project. */
async function createProject(c: Ctx, g: DemoGit): Promise<string> {
  const project = example('project.yaml').get('Project') as unknown as Project;
  project.spec.repository = { ...project.spec.repository, url: g.repositoryUrl };
  await c.o.admin.create(path(c, 'projects'), project);
  c.o.say(`demo-devws: Project demo (${g.repositoryUrl}); the controller creates demo-main and demo-create`);
  await follow(c, 'demo-create');
  const main = await workspace(c, 'demo-main');
  c.o.say(`demo-devws: demo-main is ${main.status?.observedState ?? ''}, cloned ${main.status?.baseCommitId ?? ''}`);
  return main.status?.baseCommitId ?? '';
}

/** examples/devws/lifecycle.yaml's stop, then a start (no re-clone). */
async function stopAndStart(c: Ctx): Promise<void> {
  await c.o.admin.create(path(c, 'operations'), example('lifecycle.yaml').get('Operation'));
  await follow(c, 'demo-stop');
  await c.o.admin.create(path(c, 'operations'), operation('demo-start', 'start', 'demo-main'));
  await follow(c, 'demo-start');
}

/** examples/devws/project.yaml's isolated Workspace: it clones the binding's current snapshot. */
async function isolatedWorkspace(c: Ctx): Promise<string> {
  await c.o.admin.create(path(c, 'workspaces'), example('project.yaml').get('Workspace'));
  await follow(c, 'demo-task-create');
  const task = await workspace(c, 'demo-task');
  c.o.say(`demo-devws: demo-task is ${task.status?.observedState ?? ''}, cloned ${task.status?.baseCommitId ?? ''}`);
  return task.status?.baseCommitId ?? '';
}

export async function runDevwsDemo(o: DevwsDemoOptions): Promise<DevwsDemoResult> {
  const ns = o.namespace ?? `kruntimes-devws-demo-${randomBytes(3).toString('hex')}`;
  await o.admin
    .create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } })
    .catch((err: unknown) => {
      if (!isApiError(err, 409)) throw err;
    });
  await until('the default ServiceAccount', () => o.admin.get(`/api/v1/namespaces/${ns}/serviceaccounts/default`));
  o.say(`demo-devws: namespace ${ns}; the repository and the Git Server run in this process`);
  const g = await startGit(o.admin, o.host);
  const c: Ctx = { o, ns, steps: {} };
  try {
    const mainCommit = await createProject(c, g);
    await stopAndStart(c);
    const tip = g.push({ 'CHANGES.md': 'The external repository moved on.\n' });
    o.say(`demo-devws: the external repository moved on to ${tip}; re-sync (krt project sync demo)`);
    await resync(c, tip);
    const taskCommit = await isolatedWorkspace(c);
    await c.o.admin.create(path(c, 'operations'), operation('demo-delete', 'delete_project'));
    await follow(c, 'demo-delete');
    o.say(`demo-devws: done; the Operations stay as the record: kubectl get wsop,events -n ${ns}`);
    return { namespace: ns, mainCommit, taskCommit, steps: c.steps };
  } finally {
    await g.close();
  }
}
