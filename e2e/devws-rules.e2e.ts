/**
 * Developer workspaces: seed 002 rules on the real cluster (Kubernetes substrate), one named spec
 * per rule of docs/workspaces-dev.md's table that devws.e2e.ts does not cover: invalid_ref, a
 * repository URL with a query, fragment or password, base_commit_mismatch (not recorded), an
 * Operation created queued and returned at once (202), stale_plugin_report, a Node disconnect
 * during install_plugin, external_state_conflict, a ~/.krt/plugins planted as a link out of the home
 * (unsafe_plugin_path), clone retries after 5 s and 10 s then failed (the Workspace unavailable), a
 * sandbox create answered late (held by an admission webhook of this process), and delete_project
 * waiting for a running sync (repository_operation_running).
 *
 * Faults come from TCP gates (e2e/tcp-gate.ts) in front of the Git Server (clones) and of the
 * external repository (syncs), and a ResourceQuota of no Pods that holds a create's sandbox until
 * its snapshot is recorded (so a gate closes between the sync and the clone, never racing them).
 */
import assert from 'node:assert/strict';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { chmodSync, existsSync, mkdtempSync, readdirSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isApiError } from '../lib/kube/errors.ts';
import { KubeClient } from '../lib/kube/client.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import type { Operation, Project, Workspace } from '../lib/devws/api.ts';
import { NODE_REPORT, readNodeReport, type NodeReportDoc } from '../lib/devws/node-report.ts';
import type { RunningGitServer } from '../runtimed/devws-git-server.ts';
import { WORKSPACE_LABEL } from '../functions/devws-controller/substrate.ts';
import { E2E_HOST_ADDRESS } from './cluster.ts';
import { startGitServer, type GitServer } from './git-server.ts';
import {
  admin,
  deleteNamespace,
  eventually,
  newNamespace,
  refusal,
  servingCert,
  takeRelayLeaseOver,
  type Obj,
} from './helpers.ts';
import { startTcpGate, type TcpGate } from './tcp-gate.ts';
import { configureDevws, CONFIG, G, nodeClient, RBAC, startSpecGitServer, SYNC_SECRET } from './devws-fixtures.ts';

const portOf = (url: string): number => Number(new URL(url).port);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('developer workspaces: seed rules on the cluster (Kubernetes substrate)', function () {
  let ns: string;
  let git: GitServer;
  let gitServer: RunningGitServer;
  let root: string;
  /** In front of the Git Server (every clone) and of the external repository (every sync). */
  let cloneGate: TcpGate;
  let syncGate: TcpGate;
  const p = (n: string): string => `${G}/namespaces/${ns}/${n}`;
  const op = (name: string): Promise<Operation> => admin().get<Operation>(p(`operations/${name}`));
  const ws = (name: string): Promise<Workspace> => admin().get<Workspace>(p(`workspaces/${name}`));
  const proj = (name: string): Promise<Project> => admin().get<Project>(p(`projects/${name}`));
  /** The namespace's Pods, or only the sandbox Pods of one Workspace (a Pod another spec left may still be going). */
  const pods = async (workspace?: string): Promise<string[]> => {
    const query = workspace ? { labelSelector: `${WORKSPACE_LABEL}=${workspace}` } : undefined;
    const list = await admin().list(`/api/v1/namespaces/${ns}/pods`, query);
    return list.items.map((x) => x.metadata.name ?? '').sort();
  };
  const undo: (() => Promise<unknown>)[] = [];
  /** Deletes the namespace's Node RoleBinding (its Nodes can no longer report); returns its restore. */
  const cutNodeBinding = async (): Promise<() => Promise<unknown>> => {
    const path = `${RBAC}/namespaces/${ns}/rolebindings/kruntimes-devws-node`;
    const binding = await admin().get<KubeObject & Record<string, unknown>>(path);
    await admin().delete(path);
    return () =>
      admin()
        .create(`${RBAC}/namespaces/${ns}/rolebindings`, {
          metadata: { name: binding.metadata.name, labels: binding.metadata.labels },
          roleRef: binding.roleRef,
          subjects: binding.subjects,
        })
        .catch((err: unknown) => {
          if (!isApiError(err, 409)) throw err;
        });
  };
  afterEach(async () => {
    for (const u of undo.splice(0).reverse()) await u().catch(() => undefined);
  });
  const project = (name: string, url: string, defaultBranch = 'main'): Project => ({
    apiVersion: 'dev.kruntimes.io/v1alpha1',
    kind: 'Project',
    metadata: { name },
    spec: { repository: { url, defaultBranch } },
  });
  /** The external repository as Projects name it: through the sync gate. */
  const repoUrl = (): string => git.url.replace(`:${portOf(git.url)}/`, `:${syncGate.port}/`);
  const operation = (name: string, project: string, spec: Partial<Operation['spec']>): Operation => ({
    apiVersion: 'dev.kruntimes.io/v1alpha1',
    kind: 'Operation',
    metadata: { name },
    spec: { project, kind: 'stop', ...spec },
  });
  const state = (name: string, want: (o: Operation) => boolean, what: string, timeoutMs = 60_000): Promise<Operation> =>
    eventually(
      `${name} ${what}`,
      async () => {
        const o = await op(name);
        return want(o) ? o : undefined;
      },
      timeoutMs,
      100,
      async () => JSON.stringify((await op(name)).status),
    );
  const succeeded = (name: string): Promise<Operation> =>
    state(
      name,
      (o) => {
        assert.notEqual(
          o.status?.state,
          'failed',
          `${name} failed: ${o.status?.reason ?? ''} ${o.status?.message ?? ''}`,
        );
        return o.status?.state === 'succeeded';
      },
      'succeeded',
      90_000,
    );
  /** A ResourceQuota of no Pods: a create's sandbox waits until it is removed (the returned function). */
  const holdPods = async (): Promise<() => Promise<unknown>> => {
    const path = `/api/v1/namespaces/${ns}/resourcequotas/no-pods`;
    await admin().create(`/api/v1/namespaces/${ns}/resourcequotas`, {
      metadata: { name: 'no-pods' },
      spec: { hard: { pods: '0' } },
    });
    const lift = (): Promise<unknown> =>
      admin()
        .delete(path)
        .catch((err: unknown) => {
          if (!isApiError(err, 404)) throw err;
        });
    undo.push(lift);
    return lift;
  };
  const writeReport = (workspace: string, r: NodeReportDoc) => (c: KubeClient) =>
    c.patch(p(`workspaces/${workspace}`), { metadata: { annotations: { [NODE_REPORT]: JSON.stringify(r) } } });
  const report = async (workspace: string): Promise<NodeReportDoc> => {
    const r = readNodeReport((await ws(workspace)).metadata.annotations);
    assert.ok(r, `${workspace} has a Node report`);
    return r;
  };

  before(async () => {
    ns = await newNamespace('devws-rules');
    const pki = servingCert(`devws-rules-git-${ns}`, ['git.local']);
    git = await startGitServer({ 'README.md': '# rules\n' }, pki);
    syncGate = await startTcpGate(E2E_HOST_ADDRESS, portOf(git.url));
    root = mkdtempSync(join(tmpdir(), 'krt-devws-rules-'));
    // Reads are reviewed as the spec's identity (devws.e2e.ts checks the component's role).
    gitServer = await startSpecGitServer(root, pki, admin());
    cloneGate = await startTcpGate(E2E_HOST_ADDRESS, portOf(gitServer.url));
    await configureDevws({
      gitServerUrl: `https://${E2E_HOST_ADDRESS}:${cloneGate.port}`,
      gitServerCA: pki.ca.toString(),
    });
  });
  after(async () => {
    await cloneGate.close();
    await syncGate.close();
    git.close();
    await gitServer.close();
    rmSync(root, { recursive: true, force: true });
    for (const path of [CONFIG, SYNC_SECRET]) {
      await admin()
        .delete(path)
        .catch(() => undefined);
    }
    await deleteNamespace(ns);
  });

  it('invalid_ref: a default branch Git refuses as a ref name is refused at admission and nothing is recorded', async () => {
    for (const branch of ['feature..x', 'refs/heads/main', 'topic.lock', 'a b']) {
      const r = await refusal(admin(), (c) => c.create(p('projects'), project('p-ref', repoUrl(), branch)));
      assert.match(r, /^400 .*invalid_ref/, `${branch}: ${r}`);
    }
    assert.match(await refusal(admin(), (c) => c.get(p('projects/p-ref'))), /^404 /, 'no Project recorded');
    assert.deepEqual((await admin().list(p('workspaces'))).items, [], 'no Workspace');
  });

  it('a repository URL with a query, a fragment or an embedded password is refused (invalid_repository_url) and nothing is recorded', async () => {
    const cases: [string, RegExp][] = [
      ['https://git.example/o/r.git?ref=x', /query/],
      ['https://git.example/o/r.git#main', /fragment/],
      ['https://bot:s3cret@git.example/o/r.git', /password/],
    ];
    for (const [url, why] of cases) {
      const r = await refusal(admin(), (c) => c.create(p('projects'), project('p-url', url)));
      assert.match(r, /^400 .*invalid_repository_url/, url);
      assert.match(r, why, url);
      assert.doesNotMatch(r, /s3cret/, 'the refusal does not repeat the password');
    }
    assert.match(await refusal(admin(), (c) => c.get(p('projects/p-url'))), /^404 /, 'no Project recorded');
  });

  it('base_commit_mismatch: a clone result whose commit is not the frozen baseCommit is refused (400) and not recorded; the clone of the snapshot then succeeds', async () => {
    const lift = await holdPods();
    await admin().create(p('projects'), project('p2', repoUrl()));
    await eventually('the snapshot of p2 recorded', async () => (await proj('p2')).status?.snapshot?.commit);
    cloneGate.set('hold'); // the Node's clone reaches the Git Server and waits there
    undo.push(() => Promise.resolve(cloneGate.set('pass')));
    await lift();
    const cloning = await state(
      'p2-create',
      (o) => o.status?.step === 'clone' && !!o.status.cloneInput && cloneGate.held > 0,
      'cloning (held at the Git Server)',
    );
    assert.equal(cloning.status?.cloneInput?.baseCommit, git.commit);
    const w = await ws('p2-main');
    const node = await nodeClient(ns, w.status?.sandbox?.id ?? '');
    const before = await report('p2-main');
    const wrong = 'f'.repeat(40);
    const clone = { operation: 'p2-create', attempt: 0, result: 'succeeded' as const, commit: wrong };
    const forged = { ...before, heartbeatAt: new Date().toISOString(), clone };
    const r = await refusal(node, writeReport('p2-main', forged));
    assert.match(r, /^400 .*base_commit_mismatch/);
    assert.equal((await report('p2-main')).clone, undefined, 'not recorded on the Workspace');
    const still = await op('p2-create');
    assert.deepEqual(
      [still.status?.state, still.status?.step, still.status?.cloneAttempts ?? 0],
      ['running', 'clone', 0],
      'the operation did not move',
    );
    assert.equal((await ws('p2-main')).status?.baseCommitId, undefined);
    cloneGate.set('pass');
    await succeeded('p2-create');
    const ready = await ws('p2-main');
    assert.deepEqual([ready.status?.observedState, ready.status?.baseCommitId], ['ready', git.commit]);
  });

  it('202: an Operation is returned at once, before anything ran, and is created queued (operation_created_queued)', async () => {
    const body = operation('lint1', 'p2', {
      workspace: 'p2-main',
      kind: 'install_plugin',
      plugin: { name: 'lint', manifest: '{"files":{"a.txt":"a"}}' },
    });
    const created = await admin().create<Operation>(p('operations'), body);
    assert.equal(created.status?.state, undefined, 'the create answered before the controller touched it');
    const messages = async (): Promise<string[]> => {
      const list = await admin().list<Obj & { message?: string; involvedObject?: { name?: string } }>(
        `/api/v1/namespaces/${ns}/events`,
      );
      return list.items.filter((e) => e.involvedObject?.name === 'lint1').map((e) => e.message ?? '');
    };
    const events = await eventually(
      'the Operation Events of lint1',
      async () => {
        const m = await messages();
        return m.some((x) => x.startsWith('install_plugin: succeeded')) ? m : undefined;
      },
      60_000,
      200,
      async () => (await messages()).join('; '),
    );
    assert.ok(events.includes('install_plugin: queued on step plugin'), events.join('\n'));
    assert.deepEqual((await succeeded('lint1')).status?.steps, ['plugin', 'done']);
  });

  it('stale_plugin_report: plugin results of another operation, or of an ID outside the frozen set, are refused (409) and not recorded', async () => {
    const w = await ws('p2-main');
    assert.equal(w.status?.operation?.name, 'lint1');
    const id = (await op('lint1')).status?.plugins?.[0]?.id ?? '';
    const node = await nodeClient(ns, w.status?.sandbox?.id ?? '');
    const before = await report('p2-main');
    const forge = (plugins: NodeReportDoc['plugins']): NodeReportDoc => ({
      ...before,
      heartbeatAt: new Date().toISOString(),
      plugins,
    });
    const other = forge({ operation: 'p2-create', results: [{ id, result: 'removed' }] });
    assert.match(await refusal(node, writeReport('p2-main', other)), /^409 .*stale_plugin_report/);
    const foreign = forge({
      operation: 'lint1',
      results: [{ id: 'ws-plg-00000000000000000000', result: 'installed' }],
    });
    assert.match(await refusal(node, writeReport('p2-main', foreign)), /^409 .*stale_plugin_report/);
    assert.deepEqual((await report('p2-main')).plugins, { operation: 'lint1', results: [{ id, result: 'installed' }] });
    const after = await ws('p2-main');
    assert.deepEqual(
      after.status?.plugins?.map((i) => [i.name, i.state, i.operation]),
      [['lint', 'installed', 'lint1']],
      'the instances are unchanged',
    );
  });

  it('a Node disconnect during install_plugin makes the ready Workspace unavailable and closes admission; the same Node back finishes the step and restores it', async () => {
    const w0 = await ws('p2-main');
    const incarnation = (await report('p2-main')).incarnation;
    const restore = await cutNodeBinding();
    undo.push(restore);
    await admin().create(
      p('operations'),
      operation('lint2', 'p2', {
        workspace: 'p2-main',
        kind: 'install_plugin',
        plugin: { name: 'fmt', manifest: '{"files":{"b.txt":"b"}}' },
      }),
    );
    const lost = await eventually(
      'p2-main unavailable during lint2',
      async () => {
        const w = await ws('p2-main');
        return w.status?.observedState === 'unavailable' ? w : undefined;
      },
      90_000,
      500,
    );
    assert.equal(lost.status?.admissionOpen, false, 'admission closed');
    assert.equal(lost.status?.admissionEpoch, (w0.status?.admissionEpoch ?? 0) + 1, 'its epoch bumped');
    const waiting = await op('lint2');
    assert.deepEqual([waiting.status?.state, waiting.status?.step], ['running', 'plugin'], 'no result: waits');
    await restore();
    const done = await succeeded('lint2');
    assert.equal(done.status?.plugins?.[0]?.result, 'installed');
    const back = await eventually('p2-main ready again', async () => {
      const w = await ws('p2-main');
      return w.status?.observedState === 'ready' ? w : undefined;
    });
    assert.equal(back.status?.admissionOpen, true);
    assert.equal((await report('p2-main')).incarnation, incarnation, 'the same Node instance');
    assert.equal(back.status?.runtimeGeneration, w0.status?.runtimeGeneration, 'no new generation');
  });

  it('external_state_conflict: a succeeded effect re-observed by ID with another result (the sandbox Pod names another node) is not overwritten; the operation blocks until retried explicitly', async () => {
    await admin().create(p('operations'), operation('stop-c', 'p2', { workspace: 'p2-main', kind: 'stop' }));
    await succeeded('stop-c');
    // The new generation's Node cannot report (its RoleBinding removed): the start waits on its node step.
    const restore = await cutNodeBinding();
    undo.push(restore);
    await admin().create(p('operations'), operation('start-c', 'p2', { workspace: 'p2-main', kind: 'start' }));
    const waiting = await state(
      'start-c',
      (o) => o.status?.step === 'node' && o.status.effects?.[0]?.outcome === 'succeeded',
      'waiting on its node step',
    );
    const ensure = waiting.status?.effects?.[0];
    const podPath = `/api/v1/namespaces/${ns}/pods/${ensure?.id ?? ''}`;
    const nodeId = 'dev.kruntimes.io/node-id';
    await admin().patch(podPath, { metadata: { annotations: { [nodeId]: 'another-node' } } });
    undo.push(() => admin().patch(podPath, { metadata: { annotations: { [nodeId]: ensure?.nodeId ?? '' } } }));
    await takeRelayLeaseOver(); // the effect is re-observed by its ID under the new epoch
    const blocked = await state('start-c', (o) => o.status?.state === 'blocked', 'blocked');
    assert.equal(blocked.status?.reason, 'external_state_conflict');
    assert.deepEqual(blocked.status?.effects, waiting.status?.effects, 'the recorded result is unchanged');
    await admin().patch(podPath, { metadata: { annotations: { [nodeId]: ensure?.nodeId ?? '' } } });
    await restore();
    await admin().patch(p('operations/start-c'), { spec: { retryRequests: 1 } });
    const done = await succeeded('start-c');
    assert.deepEqual(
      done.status?.effects?.map((e) => [e.id, e.outcome, e.nodeId]),
      [[ensure?.id, 'succeeded', ensure?.nodeId]],
    );
    assert.equal((await ws('p2-main')).status?.observedState, 'ready');
  });

  it("unsafe_plugin_path: a ~/.krt/plugins planted as a link out of the home is refused by the Node's install_plugin, nothing is written through it, and the Workspace stays ready", async () => {
    const w0 = await ws('p2-main');
    assert.equal(w0.status?.observedState, 'ready');
    // The Workspace's data volume as the local environment provisions it (a hostPath the sandbox mounts as its home).
    const pvc = await admin().get<KubeObject & { spec: { volumeName: string } }>(
      `/api/v1/namespaces/${ns}/persistentvolumeclaims/devws-p2-main-data`,
    );
    const pv = await admin().get<KubeObject & { spec: { hostPath?: { path: string } } }>(
      `/api/v1/persistentvolumes/${pvc.spec.volumeName}`,
    );
    assert.ok(pv.spec.hostPath, 'the local environment provisions hostPath volumes');
    const plugins = join(pv.spec.hostPath.path, '.krt', 'plugins');
    // The link's target: outside the home, a directory the Node's uid could write into (a Node that
    // followed the link would). /var/tmp, not /tmp: the node agent gives each container its own /tmp.
    const outside = mkdtempSync(join('/var/tmp', 'krt-devws-rules-outside-'));
    chmodSync(outside, 0o777);
    if (existsSync(plugins)) renameSync(plugins, `${plugins}.kept`); // the plugins installed before
    symlinkSync(outside, plugins);
    let planted = true;
    const unplant = (): Promise<void> => {
      if (planted) {
        rmSync(plugins, { force: true });
        if (existsSync(`${plugins}.kept`)) renameSync(`${plugins}.kept`, plugins);
        rmSync(outside, { recursive: true, force: true });
        planted = false;
      }
      return Promise.resolve();
    };
    undo.push(unplant);
    await admin().create(
      p('operations'),
      operation('linked1', 'p2', {
        workspace: 'p2-main',
        kind: 'install_plugin',
        plugin: { name: 'linked', manifest: '{"files":{"c.txt":"c"}}' },
      }),
    );
    const done = await succeeded('linked1');
    assert.deepEqual(done.status?.steps, ['plugin', 'done']);
    assert.deepEqual(
      done.status?.plugins?.map((i) => [i.name, i.result, i.message]),
      [['linked', 'failed', 'unsafe_plugin_path: ~/.krt/plugins is not a directory']],
      "the Node's stable reason",
    );
    assert.deepEqual(readdirSync(outside), [], 'nothing written outside the home');
    const w = await ws('p2-main');
    assert.deepEqual(
      w.status?.plugins?.filter((i) => i.name === 'linked').map((i) => [i.state, i.message]),
      [['failed', 'unsafe_plugin_path: ~/.krt/plugins is not a directory']],
      'recorded on its instance',
    );
    assert.deepEqual(
      [w.status?.observedState, w.status?.admissionOpen, w.status?.runtimeGeneration],
      ['ready', true, w0.status?.runtimeGeneration],
      'the Workspace stays ready',
    );
    await unplant();
    await admin().create(
      p('operations'),
      operation('linked2', 'p2', { workspace: 'p2-main', kind: 'remove_plugin', plugin: { name: 'linked' } }),
    );
    await succeeded('linked2');
    assert.deepEqual(
      (await ws('p2-main')).status?.plugins?.map((i) => [i.name, i.state]),
      w0.status?.plugins?.map((i) => [i.name, i.state]),
      'the failed instance removed, the installed ones kept',
    );
  });

  it('clone_failed: a failed clone is retried after 5 s, then 10 s; the third failure fails the operation and the Workspace is unavailable; the Project stays active', async () => {
    const lift = await holdPods();
    await admin().create(p('projects'), project('p1', repoUrl()));
    await eventually('the snapshot of p1 recorded', async () => (await proj('p1')).status?.snapshot?.commit);
    cloneGate.set('reset'); // every clone's connection to the Git Server is refused
    undo.push(() => Promise.resolve(cloneGate.set('pass')));
    await lift();
    const first = await state('p1-create', (o) => o.status?.state === 'retry_wait', 'retry_wait after attempt 1');
    assert.deepEqual(
      [first.status?.step, first.status?.reason, first.status?.cloneAttempts],
      ['clone', 'clone_failed', 1],
    );
    assert.match(first.status?.message ?? '', /^clone attempt 1 failed: git fetch: /, 'git says why');
    const second = await state(
      'p1-create',
      (o) => o.status?.state === 'retry_wait' && o.status.cloneAttempts === 2,
      'retry_wait after attempt 2',
    );
    // Attempt 2 ran at or after the first retryAt, so the second is at least 10 s after the first.
    const gap = Date.parse(second.status?.retryAt ?? '') - Date.parse(first.status?.retryAt ?? '');
    assert.ok(gap >= 10_000, `the second backoff is 10 s (retryAt ${gap} ms after the first)`);
    const failed = await state('p1-create', (o) => o.status?.state === 'failed', 'failed');
    assert.equal(failed.status?.reason, 'clone_failed');
    assert.match(failed.status?.message ?? '', /^clone failed 3 times: git fetch: /);
    assert.equal(failed.status?.cloneAttempts, 3);
    const w = await ws('p1-main');
    assert.deepEqual([w.status?.observedState, w.status?.admissionOpen], ['unavailable', false]);
    assert.equal(w.status?.baseCommitId, undefined, 'never cloned');
    await eventually(
      'p1 active after its failed create',
      async () => (await proj('p1')).status?.lifecycle === 'active',
    );
  });

  it('a sandbox create the API server answers late (held by an admission webhook) is never read as not executed: meanwhile nothing new is planned, every create names the effect ID; one sandbox', async () => {
    await admin().create(p('operations'), operation('stop-late', 'p2', { workspace: 'p2-main', kind: 'stop' }));
    await succeeded('stop-late');
    const generation = (await ws('p2-main')).status?.runtimeGeneration ?? 0;
    // A webhook in this process holds every Pod create of the namespace until the spec lets it go.
    const pki = servingCert(`devws-rules-hook-${ns}`, ['hook.local']);
    const held: { name: string; answer: () => void }[] = [];
    let release = false;
    const hook = https.createServer({ cert: pki.cert, key: pki.key }, (req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const request = (JSON.parse(body) as { request: { uid: string; object: KubeObject } }).request;
        const answer = (): void => {
          const review = { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' };
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify({ ...review, response: { uid: request.uid, allowed: true } }));
        };
        const name = request.object.metadata.name ?? '';
        if (name === 'hook-probe') {
          const review = { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' };
          const status = { code: 403, message: 'late-pods webhook active' };
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify({ ...review, response: { uid: request.uid, allowed: false, status } }));
        } else if (release) answer();
        else held.push({ name, answer });
      });
    });
    await new Promise<void>((r) => hook.listen(0, '127.0.0.1', () => r()));
    const letGo = (): void => {
      release = true;
      for (const h of held.splice(0)) h.answer(); // each answered once: a second answer would throw
    };
    const hookPath = `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/devws-late-${ns}`;
    undo.push(async () => {
      letGo();
      hook.close();
      hook.closeAllConnections();
      await admin().delete(hookPath);
    });
    await admin().create('/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations', {
      metadata: { name: `devws-late-${ns}` },
      webhooks: [
        {
          name: 'late-pods.e2e.kruntimes.io',
          admissionReviewVersions: ['v1'],
          sideEffects: 'None',
          failurePolicy: 'Fail',
          timeoutSeconds: 30,
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } },
          rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }],
          clientConfig: {
            url: `https://127.0.0.1:${(hook.address() as AddressInfo).port}/validate`,
            caBundle: pki.ca.toString('base64'),
          },
        },
      ],
    });
    // The webhook configuration reaches the API server's admission chain a moment after it is
    // written: a dry-run probe it refuses shows it is there.
    const probe = { metadata: { name: 'hook-probe' }, spec: { containers: [{ name: 'x', image: 'x' }] } };
    await eventually('the webhook active', async () => {
      const r = await refusal(admin(), (c) => c.create(`/api/v1/namespaces/${ns}/pods`, probe, { dryRun: 'All' }));
      return r.includes('late-pods webhook active');
    });
    await admin().create(p('operations'), operation('start-late', 'p2', { workspace: 'p2-main', kind: 'start' }));
    await eventually('the sandbox Pod create held', () => Promise.resolve(held.length > 0));
    await sleep(3000); // the controller decides again meanwhile (the Workspace's own key, its requeues)
    const waiting = await op('start-late');
    assert.deepEqual([waiting.status?.state, waiting.status?.step], ['running', 'sandbox']);
    const effects = waiting.status?.effects ?? [];
    assert.deepEqual(
      effects.map((e) => [e.kind, e.generation, e.outcome ?? 'none']),
      [['sandbox_ensure', generation + 1, 'none']],
      'one effect, no outcome: not read as done, nor as not executed',
    );
    assert.deepEqual([...new Set(held.map((h) => h.name))], [effects[0]?.id], 'every create names the effect ID');
    assert.deepEqual(await pods('p2-main'), [], 'nothing landed yet');
    letGo();
    const done = await succeeded('start-late');
    assert.deepEqual(
      done.status?.effects?.map((e) => [e.id, e.outcome]),
      [[effects[0]?.id, 'succeeded']],
    );
    assert.deepEqual(await pods('p2-main'), [effects[0]?.id], 'one sandbox, named by the effect planned before');
    assert.equal((await ws('p2-main')).status?.runtimeGeneration, generation + 1);
  });

  it('repository_operation_running: delete_project waits (retry_wait) while a sync of the repository runs, touching no Workspace, then proceeds', async () => {
    await eventually('p2 active', async () => (await proj('p2')).status?.lifecycle === 'active');
    syncGate.set('hold'); // the re-sync's fetch of the external repository waits
    undo.push(() => Promise.resolve(syncGate.set('pass')));
    await admin().patch(p('projects/p2'), { spec: { syncRequests: 1 } });
    await eventually('the re-sync of p2 running', async () => {
      const s = (await proj('p2')).status?.sync;
      return s?.operationId === 'p2-sync-2' && s.state === 'running' && syncGate.held > 0;
    });
    const w0 = await ws('p2-main');
    await admin().create(p('operations'), operation('del-p2', 'p2', { kind: 'delete_project' }));
    const parked = await state('del-p2', (o) => o.status?.state === 'retry_wait', 'parked');
    assert.deepEqual([parked.status?.step, parked.status?.reason], ['quiesce', 'repository_operation_running']);
    assert.ok(parked.status?.retryAt, 'claimable again at retryAt');
    assert.equal(parked.status?.workspacesBefore, undefined, 'no Workspace closed');
    const w = await ws('p2-main');
    assert.deepEqual(
      [w.status?.observedState, w.status?.admissionOpen, w.status?.admissionEpoch],
      ['ready', true, w0.status?.admissionEpoch],
    );
    assert.ok((await pods()).includes(w.status?.sandbox?.id ?? ''), 'its sandbox untouched');
    syncGate.set('pass');
    await eventually('the re-sync of p2 ended', async () => (await proj('p2')).status?.sync?.state === 'succeeded');
    const done = await succeeded('del-p2');
    assert.deepEqual(done.status?.steps, ['quiesce', 'terminate', 'cleanup', 'done']);
    await eventually('p2 gone', async () =>
      admin()
        .get(p('projects/p2'))
        .then(() => false)
        .catch((err: unknown) => isApiError(err, 404)),
    );
  });
});
