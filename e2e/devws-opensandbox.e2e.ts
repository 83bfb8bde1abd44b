/**
 * Developer workspaces on the OpenSandbox substrate (ADR 0020, docs/workspaces-dev.md) on the real
 * cluster: the in-cluster devws-controller, devws-sync and devws-admission with a Project whose
 * `spec.substrate` is opensandbox, against the local OpenSandbox-compatible server (the JobClass
 * work's, run by the spec where Pods reach the host) and the Git Server's code (as in
 * devws.e2e.ts).
 *
 * The test server stores sandboxes but runs nothing, so the spec plays the sandbox runtime: every
 * Running sandbox is its Node (`runtimed/devws-node.ts`, in this process) with the create request's
 * environment, its data volume a host directory, and a token of the ServiceAccount named by its
 * sandbox instance ID (the controller creates that identity; handing its token to the sandbox is
 * not built in the product, see docs/workspaces-dev.md). A Terminated sandbox's Node is stopped; a
 * wipe sandbox empties its directory and completes.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import type { ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import pino from 'pino';
import { isApiError } from '../lib/kube/errors.ts';
import { KubeClient } from '../lib/kube/client.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import type { Operation, Project, Workspace } from '../lib/devws/api.ts';
import { NODE_REPORT, readNodeReport } from '../lib/devws/node-report.ts';
import { loadNodeConfig, NodeAgent, runNodeAgent } from '../runtimed/devws-node.ts';
import type { RunningGitServer } from '../runtimed/devws-git-server.ts';
import { GIT_AUDIENCE } from '../lib/devws/git-access.ts';
import { META } from '../functions/devws-controller/opensandbox.ts';
import { createCa } from '../lib/tls/certs.ts';
import { cluster, E2E_HOST_ADDRESS, E2E_ROOT } from './cluster.ts';
import { startGitServer, type GitServer } from './git-server.ts';
import {
  admin,
  deleteNamespace,
  eventually,
  newNamespace,
  servingCert,
  takeRelayLeaseOver,
  upsert,
} from './helpers.ts';
import { startOpenSandboxServer, type OpenSandboxTestServer, type StoredSandbox } from './opensandbox-server/server.ts';
import { startTcpGate, type TcpGate } from './tcp-gate.ts';
import { CONFIG, G, startSpecGitServer, SYNC_SECRET, SYS } from './devws-fixtures.ts';

const OSB_SECRET = `/api/v1/namespaces/${SYS}/secrets/kruntimes-devws-opensandbox`;
const KEY = randomBytes(12).toString('hex');

/** The sandbox runtime the test server lacks: Nodes for Running sandboxes, wipes for wipe sandboxes. */
class Runtime {
  private readonly nodes = new Map<string, AbortController>();
  private readonly busy = new Set<string>();
  /** Sandbox instance IDs whose Node is kept down (a Node that disappeared). */
  private readonly held = new Set<string>();
  /** No new Node starts while paused (a sandbox created meanwhile waits for its Node). */
  paused = false;
  private timer: NodeJS.Timeout | undefined;
  constructor(
    private readonly srv: OpenSandboxTestServer,
    private readonly root: string,
    private readonly ns: string,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.round(), 200);
  }

  stop(): void {
    clearInterval(this.timer);
    for (const c of this.nodes.values()) c.abort();
  }

  /** Stops the Node of a sandbox instance and keeps it down. */
  hold(instance: string): void {
    this.held.add(instance);
    for (const s of this.srv.sandboxes.values()) {
      if (s.request.env?.POD_NAME !== instance) continue;
      this.nodes.get(s.id)?.abort();
      this.nodes.delete(s.id);
    }
  }

  /** Lets it come back: a new Node process (a new incarnation) of the same sandbox. */
  release(instance: string): void {
    this.held.delete(instance);
  }

  home(claim: string | undefined): string {
    const dir = join(this.root, claim ?? 'none');
    mkdirSync(dir, { recursive: true });
    return dir;
  }

  private async round(): Promise<void> {
    for (const s of this.srv.sandboxes.values()) {
      const role = s.request.metadata?.[META.role];
      const home = this.home(s.request.volumes?.[0]?.pvc?.claimName);
      if (s.status.state === 'Terminated' || s.status.state === 'Failed') this.nodes.get(s.id)?.abort();
      if (s.status.state !== 'Running' || this.nodes.has(s.id) || this.busy.has(s.id)) continue;
      if (this.held.has(s.request.env?.POD_NAME ?? '') || (this.paused && role === 'sandbox')) continue;
      if (role === 'data-wipe') {
        for (const f of readdirSync(home)) rmSync(join(home, f), { recursive: true, force: true });
        this.srv.finish(s.id, true);
      } else if (role === 'sandbox') {
        this.busy.add(s.id);
        await this.runNode(s.id, s.request.env ?? {}, home).finally(() => this.busy.delete(s.id));
      }
    }
  }

  /** The Node of one sandbox, as the ServiceAccount named by its instance ID. */
  private async runNode(id: string, env: Record<string, string>, home: string): Promise<void> {
    const instance = env.POD_NAME ?? '';
    const token = (audiences?: string[]): Promise<string | undefined> =>
      admin()
        .create<KubeObject & { status: { token: string } }>(
          `/api/v1/namespaces/${this.ns}/serviceaccounts/${instance}/token`,
          {
            apiVersion: 'authentication.k8s.io/v1',
            kind: 'TokenRequest',
            spec: { expirationSeconds: 3600, ...(audiences ? { audiences } : {}) },
          },
        )
        .then((t) => t.status.token)
        .catch(() => undefined);
    const [api, git] = [await token(), await token([GIT_AUDIENCE])];
    if (!api || !git) return; // its identity is not there yet: next round
    const gitTokenFile = join(this.root, `${instance}.git-token`);
    writeFileSync(gitTokenFile, git, { mode: 0o600 });
    const client = new KubeClient({
      server: cluster().server,
      ca: readFileSync(join(E2E_ROOT, 'pki', 'ca.crt')),
      token: api,
    });
    const cfg = loadNodeConfig({ ...env, HOME: home, KRT_NODE_POLL_MS: '500', KRT_GIT_TOKEN_FILE: gitTokenFile });
    const log = pino({ level: 'silent' });
    const stop = new AbortController();
    this.nodes.set(id, stop);
    void runNodeAgent(new NodeAgent(cfg, client, log), cfg, log, stop.signal);
  }
}

/**
 * An external repository that holds every request until released, then answers 404: the sync of
 * a Project on it runs for as long as the spec wants, then fails.
 */
async function heldRepository(tls: {
  cert: Buffer | string;
  key: Buffer | string;
}): Promise<{ url: string; release(): void }> {
  const held: (() => void)[] = [];
  let released = false;
  const notFound = (res: ServerResponse): void => {
    res.writeHead(404).end('no such repository');
  };
  const srv = https.createServer({ cert: tls.cert, key: tls.key }, (_req, res) => {
    if (released) notFound(res);
    else held.push(() => notFound(res));
  });
  await new Promise<void>((r) => srv.listen(0, E2E_HOST_ADDRESS, () => r()));
  const { port } = srv.address() as AddressInfo;
  return {
    url: `https://${E2E_HOST_ADDRESS}:${port}/missing.git`,
    release: () => {
      if (released) return;
      released = true;
      for (const answer of held.splice(0)) answer();
      srv.close();
      srv.closeIdleConnections();
    },
  };
}

describe('developer workspaces on the OpenSandbox substrate', function () {
  let ns: string;
  let git: GitServer;
  let gitServer: RunningGitServer;
  let osb: OpenSandboxTestServer;
  let runtime: Runtime;
  let root: string;
  let pki: ReturnType<typeof servingCert>;
  /** In front of the Git Server: every clone goes through it (the configured gitServerUrl). */
  let cloneGate: TcpGate;
  let gitUrl: string;
  const p = (n: string): string => `${G}/namespaces/${ns}/${n}`;
  const op = (name: string): Promise<Operation> => admin().get<Operation>(p(`operations/${name}`));
  const ws = (): Promise<Workspace> => admin().get<Workspace>(p('workspaces/p1-main'));
  const lifecycle = (name: string, kind: Operation['spec']['kind']): Operation => ({
    apiVersion: 'dev.kruntimes.io/v1alpha1',
    kind: 'Operation',
    metadata: { name },
    spec: { project: 'p1', workspace: 'p1-main', kind },
  });
  const succeeded = (name: string): Promise<Operation> =>
    eventually(
      `${name} succeeded`,
      async () => {
        const o = await op(name);
        assert.notEqual(
          o.status?.state,
          'failed',
          `${name} failed: ${o.status?.reason ?? ''} ${o.status?.message ?? ''}`,
        );
        return o.status?.state === 'succeeded' ? o : undefined;
      },
      90_000,
    );
  const sandboxes = (role: string): { id: string; instance: string; state: string }[] =>
    [...osb.sandboxes.values()]
      .filter((s) => s.request.metadata?.[META.role] === role)
      .map((s) => ({ id: s.id, instance: s.request.metadata?.[META.sandbox] ?? '', state: s.status.state }));

  /** The server's sandboxes of one Workspace (by its UID), with their role, ID metadata, volume and state. */
  const ofWorkspace = (uid: string): StoredSandbox[] =>
    [...osb.sandboxes.values()].filter((s) => s.request.metadata?.[META.workspace] === uid);
  /** Its data was deleted on the server: one wipe sandbox carrying the effect's ID, on its volume, completed. */
  const assertWiped = (w: Workspace, o: Operation): void => {
    const uid = w.metadata.uid ?? '';
    const effect = o.status?.effects?.find(
      (e) => e.kind === 'workspace_data_delete' && e.workspace === w.metadata.name,
    );
    assert.deepEqual([effect?.outcome, effect?.removed], ['succeeded', true], `${w.metadata.name ?? ''}: data removed`);
    const all = ofWorkspace(uid);
    const wipes = all.filter((s) => s.request.metadata?.[META.role] === 'data-wipe');
    assert.deepEqual(
      wipes.map((s) => [
        s.request.metadata?.[META.sandbox],
        s.request.volumes?.[0]?.pvc?.claimName,
        s.request.entrypoint?.join(' '),
        s.status.state,
        s.status.reason,
      ]),
      [[effect?.id, `devws-${uid}`, 'find /home/dev -mindepth 1 -delete', 'Terminated', 'completed']],
      'one wipe sandbox on the server, named by the effect ID, on the Workspace volume, completed',
    );
    assert.deepEqual(
      all.filter((s) => s.request.metadata?.[META.role] === 'sandbox' && s.status.state !== 'Terminated'),
      [],
      'no live sandbox of the Workspace on the server',
    );
    assert.deepEqual(readdirSync(runtime.home(`devws-${uid}`)), [], 'its volume is empty');
  };

  before(async () => {
    ns = await newNamespace('devws-osb');
    root = mkdtempSync(join(tmpdir(), 'krt-devws-osb-'));
    pki = servingCert(`devws-osb-git-${ns}`, ['git.local']);
    git = await startGitServer({ 'README.md': '# p1 on OpenSandbox\n' }, pki);
    // Reads are reviewed as the spec's identity here (devws.e2e.ts checks the component's role).
    gitServer = await startSpecGitServer(root, pki, admin());
    cloneGate = await startTcpGate(E2E_HOST_ADDRESS, Number(new URL(gitServer.url).port));
    gitUrl = `https://${E2E_HOST_ADDRESS}:${cloneGate.port}`;
    osb = await startOpenSandboxServer({ apiKeys: [KEY], insecure: true, host: E2E_HOST_ADDRESS });
    runtime = new Runtime(osb, join(root, 'volumes'), ns);
    runtime.start();
    await upsert(OSB_SECRET, { metadata: { name: 'kruntimes-devws-opensandbox' }, stringData: { apiKey: KEY } });
    const data = { gitServerUrl: gitUrl, gitServerCA: pki.ca.toString(), openSandboxEndpoint: osb.url };
    await upsert(CONFIG, { metadata: { name: 'kruntimes-devws' }, data });
  });
  after(async () => {
    runtime.stop();
    await cloneGate.close();
    git.close();
    await gitServer.close();
    assert.deepEqual(osb.requestViolations, [], 'every request the controller sent matched the OpenSandbox spec');
    await osb.close();
    for (const path of [CONFIG, SYNC_SECRET, OSB_SECRET]) {
      await admin()
        .delete(path)
        .catch(() => undefined);
    }
    await deleteNamespace(ns);
    rmSync(root, { recursive: true, force: true });
  });

  it('create_project: one OpenSandbox sandbox, found by its effect ID; its Node (the ServiceAccount of its instance) clones; ready and succeeded', async () => {
    await admin().create<Project>(p('projects'), {
      apiVersion: 'dev.kruntimes.io/v1alpha1',
      kind: 'Project',
      metadata: { name: 'p1' },
      spec: { repository: { url: git.url, defaultBranch: 'main' }, substrate: 'opensandbox' },
    });
    const done = await eventually('the controller created p1-create', () => op('p1-create')).then(() =>
      succeeded('p1-create'),
    );
    const w = await ws();
    assert.equal(w.status?.observedState, 'ready');
    assert.equal(w.status?.baseCommitId, git.commit, 'the Node cloned the snapshot');
    const ensure = done.status?.effects?.find((e) => e.kind === 'sandbox_ensure');
    const [only, ...more] = sandboxes('sandbox');
    assert.deepEqual(more, [], 'exactly one sandbox on the server');
    assert.equal(only?.instance, w.status?.sandbox?.id, 'tagged with its sandbox instance ID (the effect ID)');
    assert.equal(ensure?.externalId, only?.id, "the effect records the server's sandbox ID");
    const pods = await admin().list(`/api/v1/namespaces/${ns}/pods`);
    assert.deepEqual(pods.items, [], 'nothing ran on Kubernetes');
  });

  it('a Node that refuses to stop (an agent session runs): resource_in_use, the Workspace back to ready, the sandbox untouched', async () => {
    const w = await ws();
    const activity = join(root, 'volumes', `devws-${w.metadata.uid ?? ''}`, '.krt', 'activity');
    mkdirSync(activity, { recursive: true });
    writeFileSync(join(activity, 'session-1'), '');
    await admin().create(p('operations'), lifecycle('stop-busy', 'stop'));
    const refused = await eventually('stop-busy refused', async () => {
      const o = await op('stop-busy');
      return o.status?.state === 'failed' ? o : undefined;
    });
    rmSync(activity, { recursive: true, force: true });
    assert.equal(refused.status?.reason, 'resource_in_use');
    const after = await ws();
    assert.equal(after.status?.observedState, 'ready');
    assert.equal(after.status?.admissionOpen, true);
    assert.equal(
      after.status?.admissionEpoch,
      (w.status?.admissionEpoch ?? 0) + 1,
      'the refused close still bumped the epoch',
    );
    assert.deepEqual(
      sandboxes('sandbox').map((s) => s.state),
      ['Running'],
    );
  });

  it("plugins: install_plugin runs plugin → done on the OpenSandbox sandbox's Node (files in its data volume); a failed install is recorded and the Workspace stays ready; remove_plugin", async () => {
    const pluginOp = (
      name: string,
      kind: Operation['spec']['kind'],
      plugin: Operation['spec']['plugin'],
    ): Operation => ({
      ...lifecycle(name, kind),
      spec: { ...lifecycle(name, kind).spec, plugin },
    });
    const w0 = await ws();
    const installed = join(root, 'volumes', `devws-${w0.metadata.uid ?? ''}`, '.krt', 'plugins', 'lint');
    await admin().create(
      p('operations'),
      pluginOp('osb-lint', 'install_plugin', { name: 'lint', manifest: '{"files":{"rules/a.yaml":"a: 1"}}' }),
    );
    const done = await succeeded('osb-lint');
    assert.deepEqual(done.status?.steps, ['plugin', 'done']);
    assert.deepEqual(
      done.status?.plugins?.map((i) => [i.name, i.action, i.result]),
      [['lint', 'install', 'installed']],
    );
    assert.equal(readFileSync(join(installed, 'rules', 'a.yaml'), 'utf8'), 'a: 1', 'in the sandbox data volume');
    let w = await ws();
    assert.deepEqual(
      w.status?.plugins?.map((i) => [i.name, i.state, i.operation]),
      [['lint', 'installed', 'osb-lint']],
    );
    assert.deepEqual([w.status?.observedState, w.status?.admissionOpen], ['ready', true]);
    await admin().create(
      p('operations'),
      pluginOp('osb-bad', 'install_plugin', { name: 'bad', manifest: '{"files":{"../x":"y"}}' }),
    );
    assert.equal((await succeeded('osb-bad')).status?.plugins?.[0]?.result, 'failed', 'every item has a result');
    w = await ws();
    assert.match(w.status?.plugins?.find((i) => i.name === 'bad')?.message ?? '', /^invalid_plugin_manifest/);
    assert.equal(w.status?.observedState, 'ready', 'a failed plugin does not block readiness');
    for (const [name, plugin] of [
      ['osb-rm1', 'lint'],
      ['osb-rm2', 'bad'],
    ] as const) {
      await admin().create(p('operations'), pluginOp(name, 'remove_plugin', { name: plugin }));
      await succeeded(name);
    }
    assert.deepEqual((await ws()).status?.plugins, [], 'both instances dropped');
    assert.equal(existsSync(installed), false, 'removed from the data volume');
    assert.deepEqual(
      sandboxes('sandbox').map((s) => s.state),
      ['Running'],
      'the same sandbox throughout',
    );
  });

  it('stop and start: the Node proves idleness, the sandbox is terminated on the server and its identity deleted, the data kept; start runs generation 2 without a clone', async () => {
    const first = (await ws()).status?.sandbox?.id ?? '';
    // The Node is gone when quiesce asks for its idle proof: the stop waits, and is not read as idle.
    runtime.hold(first);
    await admin().create(p('operations'), lifecycle('stop1', 'stop'));
    const closed = await eventually('admission closed for stop1', async () => {
      const w = await ws();
      return w.status?.operation?.name === 'stop1' && w.status.admissionOpen === false ? w : undefined;
    });
    await new Promise((r) => setTimeout(r, 3000));
    const waiting = await op('stop1');
    assert.deepEqual([waiting.status?.state, waiting.status?.step], ['running', 'quiesce'], 'no Node: never advances');
    assert.notEqual((await ws()).status?.idleProof?.epoch, closed.status?.admissionEpoch);
    runtime.release(first);
    await succeeded('stop1');
    const stopped = await ws();
    assert.equal(stopped.status?.observedState, 'stopped');
    assert.deepEqual(
      sandboxes('sandbox').map((s) => s.state),
      ['Terminated'],
    );
    const sa = await admin()
      .get(`/api/v1/namespaces/${ns}/serviceaccounts/${first}`)
      .then(() => 'present')
      .catch((err: unknown) => (isApiError(err, 404) ? 'gone' : String(err)));
    assert.equal(sa, 'gone', "the old generation's Node identity is deleted");
    // A substrate that answers too late: the create of generation 2 lands but its answer is lost
    // and the server lists it only later. It is never read as "did not happen": not sent again.
    osb.faults.crashAfterCreate = 1;
    osb.faults.listLag = true;
    const posts = (): number => osb.calls.filter((c) => c.method === 'POST').length;
    const before = posts();
    await admin().create(p('operations'), lifecycle('start1', 'start'));
    await eventually('the create of generation 2 sent, its answer lost', () =>
      Promise.resolve(osb.calls.some((c) => c.method === 'POST' && c.status === 0)),
    );
    await new Promise((r) => setTimeout(r, 3000));
    assert.equal(posts(), before + 1, 'not sent again while it is not listed');
    osb.faults.listLag = false;
    assert.deepEqual((await succeeded('start1')).status?.steps, ['sandbox', 'node', 'done']);
    assert.equal(posts(), before + 1, 'the late sandbox is the one adopted');
    const started = await ws();
    assert.equal(started.status?.observedState, 'ready');
    assert.equal(started.status?.runtimeGeneration, 2);
    assert.equal(started.status?.baseCommitId, git.commit);
    assert.deepEqual(
      sandboxes('sandbox')
        .map((s) => s.state)
        .sort(),
      ['Running', 'Terminated'],
    );
    const home = join(root, 'volumes', `devws-${started.metadata.uid ?? ''}`);
    assert.ok(readdirSync(join(home, 'src')).includes('README.md'), 'the clone is still on the data volume');
  });

  it('Node disconnect (OpenSandbox): a Node that cannot reach its Workspace past the 30 s heartbeat window makes the ready Workspace unavailable and closes admission; the same Node reconnecting restores it', async () => {
    const w0 = await ws();
    assert.equal(w0.status?.observedState, 'ready');
    const incarnation = readNodeReport(w0.metadata.annotations)?.incarnation;
    assert.ok(incarnation);
    // The Node's API access: the RoleBinding of the ServiceAccount named by its sandbox instance ID.
    const path = `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings/${w0.status?.sandbox?.id ?? ''}`;
    const binding = await admin().get<KubeObject & Record<string, unknown>>(path);
    const restore = (): Promise<unknown> =>
      admin()
        .create(path.slice(0, path.lastIndexOf('/')), {
          metadata: { name: binding.metadata.name, labels: binding.metadata.labels },
          roleRef: binding.roleRef,
          subjects: binding.subjects,
        })
        .catch((err: unknown) => {
          if (!isApiError(err, 409)) throw err;
        });
    await admin().delete(path);
    try {
      const lost = await eventually(
        'p1-main unavailable',
        async () => {
          const w = await ws();
          return w.status?.observedState === 'unavailable' ? w : undefined;
        },
        90_000,
        500,
      );
      assert.equal(lost.status?.admissionOpen, false, 'admission closed');
      assert.equal(lost.status?.admissionEpoch, (w0.status?.admissionEpoch ?? 0) + 1);
    } finally {
      await restore();
    }
    const back = await eventually(
      'p1-main ready again',
      async () => {
        const w = await ws();
        return w.status?.observedState === 'ready' ? w : undefined;
      },
      60_000,
      500,
    );
    assert.equal(back.status?.admissionOpen, true);
    assert.equal(readNodeReport(back.metadata.annotations)?.incarnation, incarnation, 'the same Node instance');
    assert.equal(back.status?.runtimeGeneration, w0.status?.runtimeGeneration, 'no new generation');
    assert.deepEqual(
      sandboxes('sandbox')
        .filter((x) => x.state === 'Running')
        .map((x) => x.instance),
      [w0.status?.sandbox?.id],
      'the same sandbox',
    );
  });

  it('a lease taken over mid-operation (OpenSandbox): the start re-observes its sandbox_ensure effect of the old epoch by ID on the server before anything advances (reconcile_required); the late sandbox is adopted, not created again', async () => {
    await admin().create(p('operations'), lifecycle('stop-l', 'stop'));
    await succeeded('stop-l');
    // The create of the next generation lands but its answer is lost and the server lists it late:
    // the operation stays on its sandbox step with the effect planned under the current epoch.
    osb.faults.crashAfterCreate = 1;
    osb.faults.listLag = true;
    const posts = (): number => osb.calls.filter((c) => c.method === 'POST').length;
    const before = posts();
    try {
      await admin().create(p('operations'), lifecycle('start-l', 'start'));
      const planned = await eventually('the create sent, its answer lost', async () => {
        const e = (await op('start-l')).status?.effects?.find((x) => x.kind === 'sandbox_ensure');
        return e && posts() === before + 1 ? e : undefined;
      });
      const epoch = await takeRelayLeaseOver();
      assert.ok(
        epoch > planned.leaseEpoch,
        `the lease epoch ${epoch} is newer than the effect's ${planned.leaseEpoch}`,
      );
      const reconciled = await eventually('the effect re-observed under the new epoch', async () => {
        const o = await op('start-l');
        return o.status?.effects?.every((e) => e.leaseEpoch >= epoch) ? o : undefined;
      });
      assert.deepEqual([reconciled.status?.state, reconciled.status?.step], ['running', 'sandbox'], 'nothing advanced');
      assert.deepEqual(
        reconciled.status?.effects?.map((e) => [e.id, e.outcome ?? 'none']),
        [[planned.id, 'none']],
        'the same effect, not listed yet: absent, not planned again',
      );
      assert.equal(posts(), before + 1, 'not sent again');
      osb.faults.listLag = false;
      const done = await succeeded('start-l');
      assert.deepEqual(
        done.status?.effects?.map((e) => [e.id, e.outcome, e.leaseEpoch]),
        [[planned.id, 'succeeded', epoch]],
      );
      assert.equal(posts(), before + 1, 'the late sandbox is the one adopted');
    } finally {
      osb.faults.listLag = false;
      osb.faults.crashAfterCreate = 0;
    }
    assert.equal((await ws()).status?.observedState, 'ready');
  });

  it('external_binding_conflict: a succeeded sandbox_ensure re-observed by ID under another external ID is not rebound; the operation blocks until retried explicitly', async () => {
    await admin().create(p('operations'), lifecycle('stop-b', 'stop'));
    await succeeded('stop-b');
    runtime.paused = true; // the new sandbox's Node does not start: the start waits on its node step
    const byKey = (id: string): StoredSandbox | undefined =>
      [...osb.sandboxes.values()].find((x) => x.request.metadata?.[META.sandbox] === id);
    let moved: { from: StoredSandbox; to: StoredSandbox } | undefined;
    const putBack = (): void => {
      if (!moved) return;
      osb.sandboxes.delete(moved.to.id);
      osb.sandboxes.set(moved.from.id, moved.from);
      moved = undefined;
    };
    try {
      await admin().create(p('operations'), lifecycle('start-b', 'start'));
      const waiting = await eventually('start-b waiting on its node step', async () => {
        const o = await op('start-b');
        const e = o.status?.effects?.find((x) => x.kind === 'sandbox_ensure');
        return o.status?.step === 'node' && e?.outcome === 'succeeded' ? o : undefined;
      });
      const ensure = waiting.status?.effects?.find((x) => x.kind === 'sandbox_ensure');
      const from = byKey(ensure?.id ?? '');
      assert.ok(from, 'the sandbox on the server');
      assert.equal(ensure?.externalId, from.id);
      // The server now lists that sandbox instance under another external ID.
      moved = { from, to: { ...from, id: `${from.id}-other` } };
      osb.sandboxes.delete(from.id);
      osb.sandboxes.set(moved.to.id, moved.to);
      await takeRelayLeaseOver(); // the effect is re-observed by its ID under the new epoch
      const blocked = await eventually('start-b blocked', async () => {
        const o = await op('start-b');
        return o.status?.state === 'blocked' ? o : undefined;
      });
      assert.equal(blocked.status?.reason, 'external_binding_conflict');
      assert.deepEqual(blocked.status?.effects, waiting.status?.effects, 'still bound to its first external ID');
      putBack();
      await admin().patch(p('operations/start-b'), { spec: { retryRequests: 1 } });
    } finally {
      putBack();
      runtime.paused = false;
    }
    const done = await succeeded('start-b');
    assert.equal(done.status?.effects?.find((x) => x.kind === 'sandbox_ensure')?.outcome, 'succeeded');
    assert.equal((await ws()).status?.observedState, 'ready');
  });

  it("a Git Server CA configured after the sandbox was created (rotated from one the server's certificate does not chain to): the Node trusts the configured one at its clone; one sandbox, ready", async () => {
    const right = { gitServerUrl: gitUrl, gitServerCA: pki.ca.toString(), openSandboxEndpoint: osb.url };
    const other = (await createCa('devws-osb-other', new Date(), 1)).cert;
    await upsert(CONFIG, { metadata: { name: 'kruntimes-devws' }, data: { ...right, gitServerCA: other } });
    await admin().create<Project>(p('projects'), {
      apiVersion: 'dev.kruntimes.io/v1alpha1',
      kind: 'Project',
      metadata: { name: 'p2' },
      spec: { repository: { url: git.url, defaultBranch: 'main' }, substrate: 'opensandbox' },
    });
    const ofP2 = (): string[] =>
      [...osb.sandboxes.values()]
        .filter((s) => s.request.metadata?.[META.role] === 'sandbox' && s.request.env?.KRT_WORKSPACE === 'p2-main')
        .map((s) => s.status.state);
    await eventually('the sandbox of p2-main created under the old CA', () => Promise.resolve(ofP2().length > 0));
    await upsert(CONFIG, { metadata: { name: 'kruntimes-devws' }, data: right });
    const done = await succeeded('p2-create');
    assert.equal(done.status?.gitServerCA, right.gitServerCA, 'the clone carried the configured CA');
    const w = await admin().get<Workspace>(p('workspaces/p2-main'));
    assert.deepEqual([w.status?.observedState, w.status?.baseCommitId], ['ready', git.commit]);
    assert.deepEqual(ofP2(), ['Running'], 'the same sandbox: no new one was needed');
  });

  it("base_commit_mismatch (OpenSandbox): a clone result with another commit, written with the sandbox instance's Node identity while its clone is held, is refused (400) and not recorded", async () => {
    runtime.paused = true; // p4-main's Node starts only once its snapshot is recorded and the gate holds clones
    try {
      await admin().create<Project>(p('projects'), {
        apiVersion: 'dev.kruntimes.io/v1alpha1',
        kind: 'Project',
        metadata: { name: 'p4' },
        spec: { repository: { url: git.url, defaultBranch: 'main' }, substrate: 'opensandbox' },
      });
      await eventually('the snapshot of p4 recorded', async () => {
        const s = (await admin().get<Project>(p('projects/p4'))).status?.snapshot;
        return s?.commit;
      });
      cloneGate.set('hold'); // held until the next spec lets the original execution go on
    } finally {
      runtime.paused = false;
    }
    await eventually('the clone of p4-create held at the Git Server', async () => {
      const o = await op('p4-create');
      return o.status?.step === 'clone' && cloneGate.held > 0;
    });
    const w = await admin().get<Workspace>(p('workspaces/p4-main'));
    const instance = w.status?.sandbox?.id ?? '';
    const tr = await admin().create<KubeObject & { status: { token: string } }>(
      `/api/v1/namespaces/${ns}/serviceaccounts/${instance}/token`,
      { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 600 } },
    );
    const node = new KubeClient({
      server: cluster().server,
      ca: readFileSync(join(E2E_ROOT, 'pki', 'ca.crt')),
      token: tr.status.token,
    });
    const before = readNodeReport(w.metadata.annotations);
    assert.ok(before, 'the Node registered');
    const clone = { operation: 'p4-create', attempt: 0, result: 'succeeded', commit: 'f'.repeat(40) };
    const forged = { ...before, heartbeatAt: new Date().toISOString(), clone };
    const refused = await node
      .patch(p('workspaces/p4-main'), { metadata: { annotations: { [NODE_REPORT]: JSON.stringify(forged) } } })
      .then(
        () => 'accepted',
        (err: unknown) => (isApiError(err) ? `${err.code} ${err.message}` : String(err)),
      );
    assert.match(refused, /^400 .*base_commit_mismatch/);
    const after = await admin().get<Workspace>(p('workspaces/p4-main'));
    assert.equal(readNodeReport(after.metadata.annotations)?.clone, undefined, 'not recorded');
    const still = await op('p4-create');
    assert.deepEqual(
      [still.status?.state, still.status?.step, still.status?.cloneAttempts ?? 0],
      ['running', 'clone', 0],
    );
  });

  it("clone_result_unknown: a Node restarted mid-clone reports unknown, the operation blocks and is never dispatched again; the original execution's late definite result continues the same operation", async () => {
    const of = (name: string): Promise<Operation> => op(name);
    try {
      await eventually('the clone of p4-create held at the Git Server (the spec before)', async () => {
        const o = await of('p4-create');
        return o.status?.step === 'clone' && cloneGate.held > 0;
      });
      // The Node process stops mid-clone (its git goes on, held) and a new incarnation starts.
      const w = await admin().get<Workspace>(p('workspaces/p4-main'));
      const instance = w.status?.sandbox?.id ?? '';
      const first = readNodeReport(w.metadata.annotations)?.incarnation;
      runtime.hold(instance);
      runtime.release(instance);
      const blocked = await eventually('p4-create blocked', async () => {
        const o = await of('p4-create');
        return o.status?.state === 'blocked' ? o : undefined;
      });
      assert.deepEqual([blocked.status?.step, blocked.status?.reason], ['clone', 'clone_result_unknown']);
      assert.equal(blocked.status?.cloneUnknown, true);
      assert.equal(blocked.status?.cloneAttempts ?? 0, 0, 'no attempt consumed');
      const restarted = readNodeReport((await admin().get<Workspace>(p('workspaces/p4-main'))).metadata.annotations);
      assert.notEqual(restarted?.incarnation, first, 'reported by the new incarnation');
      assert.equal(restarted?.clone?.result, 'unknown');
      const connections = cloneGate.accepted;
      await new Promise((r) => setTimeout(r, 3000)); // several rounds of the controller and the Node
      const still = await of('p4-create');
      assert.deepEqual([still.status?.state, still.status?.cloneAttempts ?? 0], ['blocked', 0], 'never retried');
      assert.equal(cloneGate.accepted, connections, 'no second clone dispatched');
    } finally {
      cloneGate.set('pass'); // the original execution's clone goes on and reports its result late
    }
    const done = await succeeded('p4-create');
    assert.equal(done.status?.cloneAttempts ?? 0, 0, 'the same attempt, continued');
    assert.deepEqual(done.status?.steps, ['sandbox', 'node', 'clone', 'done']);
    const w = await admin().get<Workspace>(p('workspaces/p4-main'));
    assert.deepEqual([w.status?.observedState, w.status?.baseCommitId], ['ready', git.commit]);
    const ofP4 = [...osb.sandboxes.values()].filter(
      (s) => s.request.metadata?.[META.role] === 'sandbox' && s.request.env?.KRT_WORKSPACE === 'p4-main',
    );
    assert.deepEqual(
      ofP4.map((s) => s.status.state),
      ['Running'],
      'one sandbox',
    );
  });

  it('snapshot_not_ready while the first sync runs (no attempt consumed), repository_sync_failed once it fails; the Project stays active; a delete_project a busy Node refuses (resource_in_use) returns it to active', async () => {
    const repo = await heldRepository(pki);
    const proj = (): Promise<Project> => admin().get<Project>(p('projects/p3'));
    await admin().create<Project>(p('projects'), {
      apiVersion: 'dev.kruntimes.io/v1alpha1',
      kind: 'Project',
      metadata: { name: 'p3' },
      spec: { repository: { url: repo.url, defaultBranch: 'main' }, substrate: 'opensandbox' },
    });
    const parked = await eventually('p3-create parked on its clone step', async () => {
      const o = await op('p3-create').catch(() => undefined);
      return o?.status?.state === 'retry_wait' ? o : undefined;
    }).finally(() => repo.release()); // its held requests answered and the server closed, whatever happens
    assert.deepEqual([parked.status?.step, parked.status?.reason], ['clone', 'snapshot_not_ready']);
    assert.equal(parked.status?.cloneAttempts ?? 0, 0, 'no attempt consumed');
    assert.ok(parked.status?.retryAt, 'claimable again at retryAt');
    const failed = await eventually(
      'p3-create failed',
      async () => {
        const o = await op('p3-create');
        return o.status?.state === 'failed' ? o : undefined;
      },
      60_000,
    );
    assert.equal(failed.status?.reason, 'repository_sync_failed', failed.status?.message);
    assert.equal((await proj()).status?.sync?.state, 'failed');
    await eventually('p3 active after its failed create', async () => (await proj()).status?.lifecycle === 'active');
    // A busy Node refuses the delete as a whole: the Project returns to active.
    const w = await admin().get<Workspace>(p('workspaces/p3-main'));
    const activity = join(root, 'volumes', `devws-${w.metadata.uid ?? ''}`, '.krt', 'activity');
    mkdirSync(activity, { recursive: true });
    writeFileSync(join(activity, 'session-1'), '');
    const del = (name: string): Operation => ({
      apiVersion: 'dev.kruntimes.io/v1alpha1',
      kind: 'Operation',
      metadata: { name },
      spec: { project: 'p3', kind: 'delete_project' },
    });
    await admin().create(p('operations'), del('p3-del-busy'));
    const refused = await eventually('p3-del-busy refused', async () => {
      const o = await op('p3-del-busy');
      return o.status?.state === 'failed' ? o : undefined;
    });
    rmSync(activity, { recursive: true, force: true });
    assert.equal(refused.status?.reason, 'resource_in_use');
    await eventually('p3 active again', async () => (await proj()).status?.lifecycle === 'active');
    const after = await admin().get<Workspace>(p('workspaces/p3-main'));
    assert.equal(after.status?.observedState, w.status?.observedState, 'the Workspace back as it was');
    await admin().create(p('operations'), del('p3-del'));
    await succeeded('p3-del');
  });

  it("delete_workspace (OpenSandbox): an isolated Workspace's data is deleted by a wipe sandbox on the server (its own effect ID, the Workspace's volume, completed) before the Workspace is deleted; the main Workspace's data is kept", async () => {
    await admin().create(p('workspaces'), {
      apiVersion: 'dev.kruntimes.io/v1alpha1',
      kind: 'Workspace',
      metadata: { name: 'p1-task' },
      spec: { project: 'p1', kind: 'isolated', desiredState: 'running', taskTitle: 'a task' },
    });
    await succeeded('p1-task-create');
    const task = await admin().get<Workspace>(p('workspaces/p1-task'));
    const home = runtime.home(`devws-${task.metadata.uid ?? ''}`);
    assert.ok(readdirSync(join(home, 'src')).includes('README.md'), 'cloned onto its own volume');
    writeFileSync(join(home, 'notes.txt'), 'work in progress\n');
    const del = lifecycle('del-task', 'delete_workspace');
    await admin().create(p('operations'), { ...del, spec: { ...del.spec, workspace: 'p1-task' } });
    const done = await succeeded('del-task');
    assert.deepEqual(done.status?.steps, ['quiesce', 'terminate', 'cleanup', 'done']);
    assert.equal((await admin().get<Workspace>(p('workspaces/p1-task'))).status?.observedState, 'deleted');
    assertWiped(task, done);
    const main = await ws();
    assert.equal(main.status?.observedState, 'ready');
    const mainHome = runtime.home(`devws-${main.metadata.uid ?? ''}`);
    assert.ok(readdirSync(join(mainHome, 'src')).includes('README.md'), "the main Workspace's data kept");
    assert.deepEqual(
      ofWorkspace(main.metadata.uid ?? '').filter((s) => s.request.metadata?.[META.role] === 'data-wipe'),
      [],
      'no wipe of the main Workspace',
    );
  });

  it('delete_project (OpenSandbox): every Workspace closed, its sandbox terminated on the server and its data deleted by a completed wipe sandbox, then the Project goes; other Projects untouched', async () => {
    const main = await ws();
    const p1uid = (await admin().get<Project>(p('projects/p1'))).metadata.uid ?? '';
    const running = (): string[] =>
      [...osb.sandboxes.values()]
        .filter((s) => s.request.metadata?.[META.project] !== p1uid && s.status.state === 'Running')
        .map((s) => s.id)
        .sort();
    const before = running();
    await admin().create(p('operations'), {
      apiVersion: 'dev.kruntimes.io/v1alpha1',
      kind: 'Operation',
      metadata: { name: 'del-p1' },
      spec: { project: 'p1', kind: 'delete_project' },
    });
    const done = await succeeded('del-p1');
    assert.deepEqual(done.status?.steps, ['quiesce', 'terminate', 'cleanup', 'done']);
    assert.deepEqual(
      done.status?.workspacesBefore?.map((b) => b.workspace),
      ['p1-main'],
      'the isolated Workspace was deleted before',
    );
    assertWiped(main, done);
    assert.deepEqual(running(), before, "the other Projects' sandboxes untouched");
    await eventually('the Project and its Workspaces gone', async () => {
      const gone = await admin()
        .get(p('projects/p1'))
        .then(() => false)
        .catch((err: unknown) => isApiError(err, 404));
      const left = (await admin().list<Workspace>(p('workspaces'))).items.filter((x) => x.spec.project === 'p1');
      return gone && left.length === 0;
    });
  });
});
