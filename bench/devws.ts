/**
 * Developer workspaces benchmark (not a test; issue 14, docs/workspaces-dev.md), in its own local
 * environment (node agent kind), Kubernetes substrate, in one run:
 *
 * 1. Sequential, N rounds, one of each per round (interleaved, so a changing machine load weighs
 *    on all alike): a bare Pod create → Running (the bash image, one container), a bare Pod of the
 *    sandbox's shape (the same two images, the same security context, a new PVC) create →
 *    Running+Ready, a `git clone` of the Project's snapshot from the Git Server (run by the bench
 *    process on the host, with the Node's own clone code `runClone`: the same git commands; node
 *    agent Pods are host processes, so the host sees the Git Server as the Node does), then an
 *    isolated Workspace: create_workspace → ready, stop → stopped, start → ready, restart → ready,
 *    delete_workspace → deleted. Each operation is timed from its create request until the
 *    Operation succeeded and the Workspace shows the state it promises (both watched).
 * 2. M Projects (default 20) at once: create_project → ready (with its repository sync), then
 *    stop, start and restart of all M main Workspaces at once, then delete_project of all M:
 *    wall time, p50/p95 per operation, every Workspace in the right state with exactly its one
 *    sandbox Pod (none when stopped), no operation failed, blocked or deferred.
 *
 * The Git Server is `kruntimes devws-git-server`'s code (runtimed/devws-git-server.ts) run by
 * this process on the host where Pods reach it, with the component's ClusterRole (as e2e/devws
 * does: no test deploys the component). The external repository is a second local smart-HTTP server.
 *
 *   npx tsx bench/devws.ts
 *   BENCH_DEVWS_N=10            sequential rounds (each measure N times; at least 10 for the record)
 *   BENCH_DEVWS_CONCURRENT=20   Projects operated at once (0: skip phase 2)
 *   BENCH_DEVWS_REPO_FILES=200  files of 4 KiB text in the external repository's one commit
 *   BENCH_DEVWS_TIMEOUT_S=180   an operation not done by then is reported stuck (with its status) and fails the run
 *   BENCH_KEEP=1                keep the environment
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { down, up, type Env } from '../localenv/environment.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import { issueCert } from '../localenv/pki.ts';
import { KubeClient } from '../lib/kube/client.ts';
import { isApiError } from '../lib/kube/errors.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { ListWatch } from '../lib/kube/watch.ts';
import type { Operation, Project, Workspace } from '../lib/devws/api.ts';
import { GIT_AUDIENCE } from '../lib/devws/git-access.ts';
import { readNodeReport } from '../lib/devws/node-report.ts';
import { parseCidrList } from '../lib/devws/sync-target.ts';
import { NODE_IMAGE, NODE_UID, SANDBOX_IMAGE, WORKSPACE_LABEL } from '../functions/devws-controller/substrate.ts';
import { startGitServer as startDevwsGitServer, type RunningGitServer } from '../runtimed/devws-git-server.ts';
import { kubeGitAuthority } from '../runtimed/devws-git-authority.ts';
import { runClone, type NodeConfig } from '../runtimed/devws-node.ts';
import { startGitServer as startExternalRepo, type GitServer } from '../e2e/git-server.ts';
import { BENCH_NODE_KIND, benchUpOptions } from './node-kind.ts';
import { ms, ratio, summary } from './stats.ts';

const N = Number(process.env.BENCH_DEVWS_N ?? '10');
const M = Number(process.env.BENCH_DEVWS_CONCURRENT ?? '20');
const REPO_FILES = Number(process.env.BENCH_DEVWS_REPO_FILES ?? '200');
const TIMEOUT_MS = Number(process.env.BENCH_DEVWS_TIMEOUT_S ?? '180') * 1000;
const NS = 'devws-bench';
const SYS = 'kruntimes-system';
const G = `/apis/dev.kruntimes.io/v1alpha1/namespaces/${NS}`;
const RBAC = '/apis/rbac.authorization.k8s.io/v1';
/** Where Pods reach a server on the host: the node agent runs Pods as host processes. */
const HOST = '127.0.0.1';

type Pod = KubeObject & {
  status?: { phase?: string; conditions?: { type: string; status: string }[] };
};

/** An operation's first-seen times (performance.now()) of each step and state. */
interface Timeline {
  running?: number;
  steps: Map<string, number>;
  /** States other than queued/running/succeeded it went through (retry_wait, blocked, failed), with reasons. */
  detours: string[];
}

const isReady = (p: Pod | undefined): boolean =>
  p?.status?.phase === 'Running' && !!p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');

/** One timed operation: total, and the time spent per segment (queued→running, then each step). */
export interface Sample {
  ms: number;
  segments: Record<string, number>;
}

/** The objects the bench watches, and waits on conditions over them (re-checked on every event). */
class Board {
  readonly ops = new Map<string, Operation>();
  readonly wss = new Map<string, Workspace>();
  readonly pods = new Map<string, Pod>();
  readonly timelines = new Map<string, Timeline>();
  /** First seen, first Ready (sandbox Pods by name) and the first Node report of each sandbox. */
  readonly podSeen = new Map<string, number>();
  readonly podReady = new Map<string, number>();
  readonly firstReport = new Map<string, number>();
  private waiters = new Set<() => void>();
  private watches: ListWatch<KubeObject>[] = [];

  constructor(private readonly api: KubeClient) {}

  async start(): Promise<void> {
    const add = <T extends KubeObject>(path: string, map: Map<string, T>, hook?: (o: T) => void): void => {
      const w = new ListWatch<T>(this.api, { path }, (d) => {
        const name = d.object.metadata.name ?? '';
        if (d.type === 'deleted') map.delete(name);
        else map.set(name, d.object);
        hook?.(d.object);
        for (const check of [...this.waiters]) check();
      });
      w.start();
      this.watches.push(w as unknown as ListWatch<KubeObject>);
    };
    add<Operation>(`${G}/operations`, this.ops, (o) => this.record(o));
    add<Workspace>(`${G}/workspaces`, this.wss, (w) => {
      const r = readNodeReport(w.metadata.annotations);
      if (r && !this.firstReport.has(r.sandboxId)) this.firstReport.set(r.sandboxId, performance.now());
    });
    add<Pod>(`/api/v1/namespaces/${NS}/pods`, this.pods, (p) => {
      const name = p.metadata.name ?? '';
      if (!this.podSeen.has(name)) this.podSeen.set(name, performance.now());
      if (isReady(p) && !this.podReady.has(name)) this.podReady.set(name, performance.now());
    });
    await Promise.all(this.watches.map((w) => w.synced));
  }

  stop(): void {
    for (const w of this.watches) w.stop();
  }

  private record(o: Operation): void {
    const name = o.metadata.name ?? '';
    const t = performance.now();
    let tl = this.timelines.get(name);
    if (!tl) this.timelines.set(name, (tl = { steps: new Map(), detours: [] }));
    const s = o.status;
    if (s?.state === 'running' && tl.running === undefined) tl.running = t;
    if (s?.step && !tl.steps.has(s.step)) tl.steps.set(s.step, t);
    if (s?.state && !['queued', 'running', 'succeeded'].includes(s.state)) {
      const d = `${s.state}${s.reason ? ` ${s.reason}` : ''} on ${s.step ?? '?'}`;
      if (!tl.detours.includes(d)) tl.detours.push(d);
    }
  }

  /** Resolves with the time `test` first holds (checked now and on every event); rejects when it throws or on timeout. */
  until(what: string, test: () => boolean, explain: () => string, timeoutMs = TIMEOUT_MS): Promise<number> {
    return new Promise((resolve, reject) => {
      const done = (): void => {
        clearTimeout(timer);
        this.waiters.delete(check);
      };
      const check = (): void => {
        try {
          if (!test()) return;
        } catch (err) {
          done();
          reject(err instanceof Error ? err : new Error(String(err)));
          return;
        }
        done();
        resolve(performance.now());
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`stuck: ${what} not reached in ${timeoutMs / 1000} s; ${explain()}`));
      }, timeoutMs);
      this.waiters.add(check);
      check();
    });
  }

  /** The live sandbox Pods of a Workspace (by the controller's label). */
  sandboxes(ws: string): string[] {
    return [...this.pods.values()]
      .filter((p) => p.metadata.labels?.[WORKSPACE_LABEL] === ws && !p.metadata.deletionTimestamp)
      .map((p) => p.metadata.name ?? '');
  }

  describe(op: string, ws: string): string {
    const o = this.ops.get(op)?.status;
    const w = this.wss.get(ws)?.status;
    return (
      `Operation ${op}: ${JSON.stringify({ state: o?.state, step: o?.step, reason: o?.reason, message: o?.message, retryAt: o?.retryAt })}; ` +
      `Workspace ${ws}: ${JSON.stringify({ observed: w?.observedState, operation: w?.operation, sandbox: w?.sandbox, node: w?.node })}; ` +
      `sandbox Pods ${JSON.stringify(this.sandboxes(ws).map((p) => `${p} ready=${String(isReady(this.pods.get(p)))}`))}; ` +
      `Node report ${JSON.stringify(readNodeReport(this.wss.get(ws)?.metadata.annotations) ?? null)}`
    );
  }

  /** Segments of a finished operation: queued→running, then each step until the next (the last until succeeded). */
  segments(op: string, t0: number, end: number): Record<string, number> {
    const tl = this.timelines.get(op);
    const steps = this.ops.get(op)?.status?.steps ?? [];
    const out: Record<string, number> = {};
    if (!tl?.running) return out;
    out['queued→running'] = tl.running - t0;
    steps.forEach((step, k) => {
      const from = k === 0 ? tl.running : tl.steps.get(step);
      const next = steps[k + 1];
      const to = next ? tl.steps.get(next) : end;
      if (from !== undefined && to !== undefined) out[step] = to - from;
    });
    return { ...out, ...this.sandboxSegments(op, t0) };
  }

  /** For an operation that started a sandbox: its Pod created → Ready, Ready → the Node's first report. */
  private sandboxSegments(op: string, t0: number): Record<string, number> {
    const ensure = this.ops.get(op)?.status?.effects?.find((e) => e.kind === 'sandbox_ensure');
    const seen = ensure ? this.podSeen.get(ensure.id) : undefined;
    const ready = ensure ? this.podReady.get(ensure.id) : undefined;
    const report = ensure ? this.firstReport.get(ensure.id) : undefined;
    if (seen === undefined || seen < t0 || ready === undefined || report === undefined) return {};
    return { '(Pod seen→Ready)': ready - seen, '(Ready→Node report)': report - ready };
  }
}

/** Times an operation: from `start` (its create request) until it succeeded and its Workspace shows `wsState`. */
async function timeOp(
  b: Board,
  op: string,
  ws: string,
  wsState: string,
  start: () => Promise<unknown>,
): Promise<Sample> {
  const t0 = performance.now();
  await start();
  const end = await b.until(
    `${op} succeeded with ${ws} ${wsState}`,
    () => {
      const o = b.ops.get(op);
      if (o?.status?.state === 'failed')
        throw new Error(`${op} failed: ${o.status.reason ?? ''} ${o.status.message ?? ''}; ${b.describe(op, ws)}`);
      return o?.status?.state === 'succeeded' && b.wss.get(ws)?.status?.observedState === wsState;
    },
    () => b.describe(op, ws),
  );
  return { ms: end - t0, segments: b.segments(op, t0, end) };
}

const operation = (name: string, project: string, kind: Operation['spec']['kind'], workspace?: string): Operation => ({
  apiVersion: 'dev.kruntimes.io/v1alpha1',
  kind: 'Operation',
  metadata: { name },
  spec: { project, kind, ...(workspace ? { workspace } : {}) },
});

const project = (name: string, url: string): Project => ({
  apiVersion: 'dev.kruntimes.io/v1alpha1',
  kind: 'Project',
  metadata: { name },
  spec: { repository: { url, defaultBranch: 'main' } },
});

/** Creates an object, retrying while the admission webhooks of a fresh environment are not serving yet. */
async function createRetrying(api: KubeClient, path: string, body: KubeObject): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      await api.create(path, body);
      return;
    } catch (err) {
      if (i >= 60 || (isApiError(err) && err.code < 500)) throw err;
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

/** The sandbox Pod's shape without the controller: the same images, security context and data volume. */
function barePod(name: string, shaped: boolean): KubeObject {
  const sleep = ['sleep', '86400'];
  const home = [{ name: 'home', mountPath: '/home/dev' }];
  const containers = shaped
    ? [
        { name: 'node', image: NODE_IMAGE, command: sleep, volumeMounts: home },
        { name: 'dev', image: SANDBOX_IMAGE, command: sleep, volumeMounts: home },
      ]
    : [{ name: 'dev', image: SANDBOX_IMAGE, command: sleep }];
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { 'bench.kruntimes.io/bare': 'true' } },
    spec: {
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      ...(shaped
        ? {
            securityContext: { runAsNonRoot: true, runAsUser: NODE_UID, runAsGroup: NODE_UID, fsGroup: NODE_UID },
            volumes: [{ name: 'home', persistentVolumeClaim: { claimName: `${name}-data` } }],
          }
        : {}),
      containers,
    },
  };
}

/** A bare Pod create → Running (and Ready); the sandbox-shaped one creates its PVC first, as ensure does. */
async function timeBarePod(api: KubeClient, b: Board, name: string, shaped: boolean): Promise<number> {
  const t0 = performance.now();
  if (shaped)
    await api.create(`/api/v1/namespaces/${NS}/persistentvolumeclaims`, {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: `${name}-data` },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
    });
  await api.create(`/api/v1/namespaces/${NS}/pods`, barePod(name, shaped));
  const end = await b.until(
    `bare Pod ${name} Running`,
    () => {
      const p = b.pods.get(name);
      if (p?.status?.phase === 'Failed') throw new Error(`bare Pod ${name} failed`);
      return isReady(p);
    },
    () => JSON.stringify(b.pods.get(name)?.status ?? {}),
  );
  const took = end - t0;
  await api.delete(`/api/v1/namespaces/${NS}/pods/${name}`, { gracePeriodSeconds: 0 });
  if (shaped) await api.delete(`/api/v1/namespaces/${NS}/persistentvolumeclaims/${name}-data`);
  return took;
}

/** What the bench needs beside the environment: the external repository, the Git Server, its config, a reader. */
interface Fixture {
  external: GitServer;
  gitServer: RunningGitServer;
  ca: Buffer;
  dir: string;
  close(): Promise<void>;
}

async function tokenFor(api: KubeClient, sa: string, audiences?: string[]): Promise<string> {
  const tr = await api.create<KubeObject & { status: { token: string } }>(
    `/api/v1/namespaces/${NS}/serviceaccounts/${sa}/token`,
    {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { expirationSeconds: 3600, ...(audiences ? { audiences } : {}) },
    },
  );
  return tr.status.token;
}

/** The Git Server's API identity as the component ships it (its ClusterRole), and a reader the bench clones as. */
async function identities(env: Env): Promise<KubeClient> {
  const api = env.admin;
  const file = readFileSync(join(REPO_ROOT, 'kustomize/components/devws-git-server/git-server.yaml'), 'utf8');
  const role = parseAllDocuments(file)
    .map((d) => d.toJSON() as KubeObject)
    .find((d) => d.kind === 'ClusterRole');
  if (!role) throw new Error('the devws-git-server component has no ClusterRole');
  await api.create(`${RBAC}/clusterroles`, role);
  for (const sa of ['devws-git', 'git-reader'])
    await api.create(`/api/v1/namespaces/${NS}/serviceaccounts`, { metadata: { name: sa } });
  await api.create(`${RBAC}/clusterrolebindings`, {
    metadata: { name: `kruntimes:devws-git:${NS}` },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'kruntimes:devws-git' },
    subjects: [{ kind: 'ServiceAccount', name: 'devws-git', namespace: NS }],
  });
  // The bench's clone identity: get projects/repository (a SubjectAccessReview on the Git Server).
  await api.create(`${RBAC}/namespaces/${NS}/roles`, {
    metadata: { name: 'git-reader' },
    rules: [{ apiGroups: ['dev.kruntimes.io'], resources: ['projects/repository'], verbs: ['get'] }],
  });
  await api.create(`${RBAC}/namespaces/${NS}/rolebindings`, {
    metadata: { name: 'git-reader' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'git-reader' },
    subjects: [{ kind: 'ServiceAccount', name: 'git-reader', namespace: NS }],
  });
  return new KubeClient({
    server: env.server,
    ca: readFileSync(join(env.state.root, 'pki', 'ca.crt')),
    token: await tokenFor(api, 'devws-git'),
  });
}

function repositoryFiles(): Record<string, string> {
  const files: Record<string, string> = { 'README.md': '# bench\n' };
  for (let i = 0; i < REPO_FILES; i++) {
    const lines = Array.from({ length: 64 }, (_, k) => `line ${k} of file ${i}: ${randomBytes(24).toString('hex')}`);
    files[`f${String(i).padStart(4, '0')}.txt`] = `${lines.join('\n')}\n`;
  }
  return files;
}

async function fixture(env: Env): Promise<Fixture> {
  const api = env.admin;
  const pki = join(env.state.root, 'pki');
  issueCert(pki, {
    name: 'devws-bench-git',
    cn: 'git.local',
    usage: 'server',
    dns: ['git.local', 'localhost'],
    ips: [HOST],
  });
  const r = (f: string): Buffer => readFileSync(join(pki, f));
  const tls = { ca: r('ca.crt'), cert: r('devws-bench-git.crt'), key: r('devws-bench-git.key') };
  const dir = join(env.state.root, 'devws-bench');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'external-ca.pem'), tls.ca);
  await api.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
  const external = await startExternalRepo(repositoryFiles(), tls);
  const syncToken = randomBytes(24).toString('hex');
  const gitServer = await startDevwsGitServer({
    root: join(dir, 'repos'),
    cert: tls.cert,
    key: tls.key,
    syncToken,
    externalCAFile: join(dir, 'external-ca.pem'),
    host: HOST,
    authority: kubeGitAuthority(await identities(env)),
    targets: { allow: parseCidrList(`${HOST}/32`), deny: [] },
  });
  await api.create(`/api/v1/namespaces/${SYS}/secrets`, {
    metadata: { name: 'kruntimes-devws-git-sync' },
    stringData: { token: syncToken },
  });
  await api.create(`/api/v1/namespaces/${SYS}/configmaps`, {
    metadata: { name: 'kruntimes-devws' },
    data: { gitServerUrl: gitServer.url, gitServerCA: tls.ca.toString() },
  });
  return {
    external,
    gitServer,
    ca: tls.ca,
    dir,
    close: async () => {
      external.close();
      await gitServer.close();
    },
  };
}

/** A `git clone` of the snapshot with the Node's own code (runClone), as the bench's reader, with a fresh token. */
async function timeClone(api: KubeClient, f: Fixture, p: Project, i: number): Promise<number> {
  const tokenFile = join(f.dir, 'reader-token');
  writeFileSync(tokenFile, await tokenFor(api, 'git-reader', [GIT_AUDIENCE]), { mode: 0o600 });
  const home = join(f.dir, 'clone-home');
  mkdirSync(home, { recursive: true });
  const self = { nodeId: 'bench', incarnation: 'bench', sandboxId: 'bench', generation: 1 };
  const cfg: NodeConfig = {
    namespace: NS,
    workspace: 'bench',
    self,
    home,
    gitCA: f.ca.toString(),
    gitTokenFile: tokenFile,
    pollMs: 1000,
  };
  const snap = p.status?.snapshot;
  if (!snap?.ref || !snap.commit) throw new Error(`Project ${p.metadata.name ?? ''} has no snapshot`);
  const input = {
    repositoryUrl: `${f.gitServer.url}/${NS}/${p.metadata.name ?? ''}.git`,
    snapshotRef: snap.ref,
    baseCommit: snap.commit,
    workspaceBranch: `refs/heads/workspaces/bench-${i}/main`,
  };
  const t0 = performance.now();
  const r = await runClone(cfg, {
    kind: 'clone',
    operation: `bench-${i}`,
    attempt: 0,
    input,
    localBranch: 'main',
    base: { nodeId: 'bench', incarnation: 'bench', sandboxId: 'bench', generation: 1, heartbeatAt: '' },
  });
  const took = performance.now() - t0;
  if (r.commit !== snap.commit)
    throw new Error(`the bench clone got ${r.commit ?? '?'}, the snapshot is ${snap.commit}`);
  rmSync(tokenFile, { force: true });
  return took;
}

interface Seq {
  bash: number[];
  shaped: number[];
  clone: number[];
  ops: Record<'create_workspace' | 'stop' | 'start' | 'restart' | 'delete_workspace', Sample[]>;
}

/** One round: bare Pods, the clone, then an isolated Workspace through its whole life. */
async function round(r: { env: Env; b: Board; f: Fixture; p: Project }, i: number, out: Seq): Promise<void> {
  const { env, b, f, p } = r;
  const api = env.admin;
  out.bash.push(await timeBarePod(api, b, `bare-${i}`, false));
  out.shaped.push(await timeBarePod(api, b, `shaped-${i}`, true));
  out.clone.push(await timeClone(api, f, p, i));
  const ws = `t-${i}`;
  const pname = p.metadata.name ?? '';
  out.ops.create_workspace.push(
    await timeOp(b, `${ws}-create`, ws, 'ready', () =>
      api.create(`${G}/workspaces`, {
        apiVersion: 'dev.kruntimes.io/v1alpha1',
        kind: 'Workspace',
        metadata: { name: ws },
        spec: { project: pname, kind: 'isolated', desiredState: 'running', taskTitle: `bench ${i}` },
      }),
    ),
  );
  const lifecycle: [keyof Seq['ops'], string][] = [
    ['stop', 'stopped'],
    ['start', 'ready'],
    ['restart', 'ready'],
    ['delete_workspace', 'deleted'],
  ];
  for (const [kind, state] of lifecycle) {
    const name = `${ws}-${kind.replace('_workspace', '')}`;
    out.ops[kind].push(
      await timeOp(b, name, ws, state, () => api.create(`${G}/operations`, operation(name, pname, kind, ws))),
    );
  }
  const left = b.sandboxes(ws);
  if (left.length > 0) throw new Error(`round ${i}: ${ws} deleted but its sandbox Pods remain: ${left.join(', ')}`);
}

const emptySeq = (): Seq => ({
  bash: [],
  shaped: [],
  clone: [],
  ops: { create_workspace: [], stop: [], start: [], restart: [], delete_workspace: [] },
});

/** Fills `out` round by round (a stuck round leaves the rounds before it measured). */
async function sequential(env: Env, b: Board, f: Fixture, out: Seq): Promise<void> {
  const api = env.admin;
  const create = await timeOp(b, 'seq-create', 'seq-main', 'ready', () =>
    createRetrying(api, `${G}/projects`, project('seq', f.external.url)),
  );
  process.stderr.write(`  [devws bench] Project seq: create_project → ready ${ms(create.ms)}\n`);
  const p = await api.get<Project>(`${G}/projects/seq`);
  for (let i = 0; i < N; i++) {
    await round({ env, b, f, p }, i, out);
    process.stderr.write(`  [devws bench] round ${i + 1}/${N} done (load ${loadavg()[0]?.toFixed(2) ?? '?'})\n`);
  }
}

interface Burst {
  kind: string;
  samples: Sample[];
  wallMs: number;
  wrong: string[];
  detours: string[];
  load: number;
}

/**
 * What is not in the right state once every operation succeeded: `wrongOf` per Project, given 10 s
 * for the watches of Pods and Workspaces to catch up with the Operations'.
 */
async function settled(b: Board, projects: string[], wrongOf: (p: string) => string | undefined): Promise<string[]> {
  const wrong = (): string[] => projects.flatMap((p) => wrongOf(p) ?? []);
  await b
    .until(
      'every Workspace in its state',
      () => wrong().length === 0,
      () => '',
      10_000,
    )
    .catch(() => undefined);
  return wrong();
}

/** M operations at once, one per Project `c-<k>`: wall time, samples, and what is not in the right state. */
async function burst(
  b: Board,
  kind: string,
  opName: (p: string) => string,
  wsState: string,
  start: (p: string) => Promise<unknown>,
): Promise<Burst> {
  const projects = Array.from({ length: M }, (_, k) => `c-${k}`);
  const t0 = performance.now();
  const samples = await Promise.all(projects.map((p) => timeOp(b, opName(p), `${p}-main`, wsState, () => start(p))));
  const wallMs = performance.now() - t0;
  const wrong = await settled(b, projects, (p) => {
    const ws = b.wss.get(`${p}-main`);
    const live = b.sandboxes(`${p}-main`);
    const want = wsState === 'ready' ? [ws?.status?.sandbox?.id ?? '?'] : [];
    return JSON.stringify(live) === JSON.stringify(want) && ws?.status?.observedState === wsState
      ? undefined
      : `${p}-main ${ws?.status?.observedState ?? '?'} with sandbox Pods ${JSON.stringify(live)}`;
  });
  const detours = projects.flatMap((p) => (b.timelines.get(opName(p))?.detours ?? []).map((d) => `${opName(p)}: ${d}`));
  return { kind, samples, wallMs, wrong, detours, load: loadavg()[0] ?? NaN };
}

async function concurrent(env: Env, b: Board, f: Fixture, out: Burst[]): Promise<void> {
  const api = env.admin;
  const note = (x: Burst): void => {
    out.push(x);
    process.stderr.write(`  [devws bench] ${M} × ${x.kind}: wall ${ms(x.wallMs)}\n`);
  };
  note(
    await burst(
      b,
      'create_project',
      (p) => `${p}-create`,
      'ready',
      (p) => createRetrying(api, `${G}/projects`, project(p, f.external.url)),
    ),
  );
  for (const [kind, state] of [
    ['stop', 'stopped'],
    ['start', 'ready'],
    ['restart', 'ready'],
  ] as const) {
    note(
      await burst(
        b,
        kind,
        (p) => `${p}-${kind}`,
        state,
        (p) => api.create(`${G}/operations`, operation(`${p}-${kind}`, p, kind, `${p}-main`)),
      ),
    );
  }
  note(await deleteProjects(api, b));
}

/** delete_project of all M at once: until each Operation succeeded and its Project is gone. */
async function deleteProjects(api: KubeClient, b: Board): Promise<Burst> {
  const projects = Array.from({ length: M }, (_, k) => `c-${k}`);
  const t0 = performance.now();
  const samples = await Promise.all(
    projects.map(async (p) => {
      const op = `${p}-delete`;
      const s0 = performance.now();
      await api.create(`${G}/operations`, {
        ...operation(op, p, 'delete_project'),
        spec: { project: p, kind: 'delete_project' },
      });
      const end = await b.until(
        `${op} succeeded`,
        () => {
          const s = b.ops.get(op)?.status;
          if (s?.state === 'failed') throw new Error(`${op} failed: ${s.reason ?? ''} ${s.message ?? ''}`);
          return s?.state === 'succeeded';
        },
        () => b.describe(op, `${p}-main`),
      );
      return { ms: end - s0, segments: b.segments(op, s0, end) };
    }),
  );
  const wallMs = performance.now() - t0;
  const wrong = await settled(b, projects, (p) =>
    b.sandboxes(`${p}-main`).length > 0 || b.wss.has(`${p}-main`) ? `${p}-main or its sandbox Pods remain` : undefined,
  );
  const detours = projects.flatMap((p) =>
    (b.timelines.get(`${p}-delete`)?.detours ?? []).map((d) => `${p}-delete: ${d}`),
  );
  return { kind: 'delete_project', samples, wallMs, wrong, detours, load: loadavg()[0] ?? NaN };
}

const row = (cells: string[]): string => `| ${cells.join(' | ')} |`;

/** The per-segment p50 of each kind's samples: where an operation's time goes. */
function breakdown(label: string, kinds: [string, Sample[]][]): string[] {
  const lines = [
    `${label}`,
    '',
    row(['operation', 'p50 per segment (queued→running, then each step until the next)']),
    row(['---', '---']),
  ];
  for (const [kind, samples] of kinds) {
    const names = [...new Set(samples.flatMap((s) => Object.keys(s.segments)))];
    const cells = names.map((n) => `${n} ${ms(summary(samples.flatMap((s) => s.segments[n] ?? [])).p50)}`);
    lines.push(row([kind, cells.join(', ')]));
  }
  return lines;
}

/** The sequential table's operation rows, in order. */
const OPERATION_ROWS = [
  ['create_workspace', 'create_workspace → ready (sandbox, node, clone)'],
  ['stop', 'stop → stopped (quiesce, terminate)'],
  ['start', 'start → ready (sandbox, node; no clone)'],
  ['restart', 'restart → ready (quiesce, terminate, sandbox, node)'],
  ['delete_workspace', 'delete_workspace → deleted (quiesce, terminate, cleanup)'],
] as const;

function report(seq: Seq, b: Board, bursts: Burst[], loads: { start: number[]; end: number[] }, date: string): string {
  const base = summary(seq.shaped);
  const line = (label: string, xs: number[]): string => {
    const s = summary(xs);
    return row([label, String(s.n), ms(s.p50), ms(s.p95), ratio(s.p50, base.p50), ratio(s.p95, base.p95)]);
  };
  const lines = [
    `Developer workspaces, Kubernetes substrate, node kind ${BENCH_NODE_KIND}, ${date}; load average at start ${loads.start.map((x) => x.toFixed(2)).join(' ')}, at end ${loads.end.map((x) => x.toFixed(2)).join(' ')}`,
    `Sequential: ${N} rounds, one of each per round; external repository ${REPO_FILES + 1} files (~${Math.round((REPO_FILES * 4.2) / 1024)} MiB)`,
    '',
    row(['measure', 'n', 'p50', 'p95', '× bare Pod p50', '× bare Pod p95']),
    row(['---', '---:', '---:', '---:', '---:', '---:']),
    line('bare Pod (bash, 1 container) create → Running', seq.bash),
    line('bare Pod, sandbox shape (same 2 images, new PVC) create → Running+Ready', seq.shaped),
    line('`git clone` of the snapshot from the Git Server (bench process, the Node’s clone code)', seq.clone),
    ...OPERATION_ROWS.map(([op, label]) =>
      line(
        label,
        seq.ops[op].map((s) => s.ms),
      ),
    ),
    '',
    ...breakdown('Where the sequential operations’ time goes:', Object.entries(seq.ops)),
    '',
    `Sequential operations that were deferred, blocked or failed: ${seqDetours(b)}`,
  ];
  if (bursts.length > 0) lines.push('', ...burstTable(bursts));
  return `${lines.join('\n')}\n`;
}

function seqDetours(b: Board): string {
  const all = [...b.timelines.entries()]
    .filter(([name]) => !name.startsWith('c-'))
    .flatMap(([name, tl]) => tl.detours.map((d) => `${name}: ${d}`));
  return all.length === 0 ? 'none' : all.join('; ');
}

function burstTable(bursts: Burst[]): string[] {
  const lines = [
    `${M} Workspaces operated at once (${M} Projects, their main Workspaces; one unfinished operation per Project is the rule):`,
    '',
    row(['operation', 'wall', 'p50', 'p95', 'max', 'right state', 'failed/blocked/deferred', 'load (1 min)']),
    row(['---', '---:', '---:', '---:', '---:', '---', '---', '---:']),
  ];
  for (const x of bursts) {
    const s = summary(x.samples.map((y) => y.ms));
    const max = Math.max(...x.samples.map((y) => y.ms));
    const right = x.wrong.length === 0 ? `${M}/${M}` : `${M - x.wrong.length}/${M}: ${x.wrong.join('; ')}`;
    const detours = x.detours.length === 0 ? 'none' : x.detours.join('; ');
    lines.push(row([x.kind, ms(x.wallMs), ms(s.p50), ms(s.p95), ms(max), right, detours, x.load.toFixed(2)]));
  }
  lines.push(
    '',
    ...breakdown(
      'Where the concurrent operations’ time goes:',
      bursts.map((x) => [x.kind, x.samples]),
    ),
  );
  return lines;
}

/** Deferrals the seed prescribes (a snapshot not synced yet) are not errors; anything else failed or blocked is. */
const isError = (detour: string): boolean => !/retry_wait snapshot_not_ready/.test(detour);

async function main(): Promise<void> {
  if (BENCH_NODE_KIND !== 'agent')
    throw new Error('bench/devws.ts runs on the node agent kind only (Pods reach the host at 127.0.0.1)');
  if (N < 1) throw new Error('BENCH_DEVWS_N must be at least 1');
  const root = join(REPO_ROOT, '.kruntimes', 'bench', `devws-${process.pid}`);
  const env = await up({ root, ...benchUpOptions(['bench-a', 'bench-b']) });
  const b = new Board(env.admin);
  const seq = emptySeq();
  const bursts: Burst[] = [];
  const loads = { start: loadavg(), end: [] as number[] };
  const date = new Date().toISOString();
  let f: Fixture | undefined;
  let failure: Error | undefined;
  try {
    f = await fixture(env);
    await b.start();
    await sequential(env, b, f, seq);
    if (M > 0) await concurrent(env, b, f, bursts);
  } catch (err) {
    failure = err instanceof Error ? err : new Error(String(err));
  } finally {
    loads.end = loadavg();
    // Whatever was measured is printed, also when an operation got stuck.
    if (seq.bash.length > 0) process.stdout.write(report(seq, b, bursts, loads, date));
    b.stop();
    await f?.close();
    env.admin.close();
    if (process.env.BENCH_KEEP !== '1') await down(root, { purge: true });
  }
  if (failure) throw failure;
  const bad = bursts.filter((x) => x.wrong.length > 0 || x.detours.some(isError));
  if (bad.length > 0)
    throw new Error(`not every Workspace reached the right state cleanly: ${bad.map((x) => x.kind).join(', ')}`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
