/**
 * The OpenSandbox substrate against the real local OpenSandbox-compatible server
 * (e2e/opensandbox-server, the JobClass work's) through the real client: ensure by ID is
 * idempotent, get by ID never creates, terminate is confirmed by the server's state, a lost
 * answer or an unanswered list is never read as "did not happen", and the controller drives a
 * create_project's sandbox step on it to one recorded sandbox.
 */
import assert from 'node:assert/strict';
import { D, type Effect, type Operation, type Project, type Workspace } from '../../lib/devws/api.ts';
import { FakeState } from '../../lib/fn/fake-state.ts';
import { R } from '../../lib/fn/resources.ts';
import type { Operation as FnOp } from '../../lib/fn/types.ts';
import { OpenSandboxClient } from '../../lib/opensandbox/client.ts';
import { startOpenSandboxServer, type OpenSandboxTestServer } from '../../e2e/opensandbox-server/server.ts';
import { handleWithSubstrate } from './index.ts';
import { LANDING_MS, META, OpenSandboxSubstrate, SEND_WINDOW_MS, observeProject, perform } from './opensandbox.ts';
import { OPENSANDBOX_SECRET, type OpenSandboxDeps } from './opensandbox-run.ts';

const KEY = 'devws-test-key';
const PROJECT_UID = 'proj-uid-1';
const NS = 'team';
const LOOPBACK = { insecureHosts: ['127.0.0.1'] };
const ws: Workspace = {
  metadata: { name: 'p1-main', namespace: NS, uid: 'ws-uid-1' },
  spec: { project: 'p1', kind: 'main', desiredState: 'running' },
};
const OPTS = { generation: 1 };

describe('devws OpenSandbox substrate (real local OpenSandbox server)', () => {
  let srv: OpenSandboxTestServer;
  let api: OpenSandboxClient;
  const now = new Date();
  const planned = (id: string, sentAt = now): Effect => ({
    id,
    kind: 'sandbox_ensure',
    leaseEpoch: 0,
    sentAt: sentAt.toISOString(),
  });
  const observe = async (): Promise<OpenSandboxSubstrate> => {
    const r = await observeProject(api, PROJECT_UID);
    assert.ok(r.ok, r.ok ? '' : r.error);
    return new OpenSandboxSubstrate(r.sandboxes, { uid: PROJECT_UID, namespace: NS });
  };
  const posts = (): number => srv.calls.filter((c) => c.method === 'POST').length;

  beforeEach(async () => {
    srv = await startOpenSandboxServer({ apiKeys: [KEY], insecure: true });
    api = new OpenSandboxClient({
      endpoint: srv.url,
      apiKey: KEY,
      policy: LOOPBACK,
      timeoutMs: 2000,
      createTimeoutMs: 2000,
    });
  });
  afterEach(async () => {
    assert.deepEqual(srv.requestViolations, [], 'every request matched the spec');
    assert.deepEqual(srv.responseViolations, []);
    await srv.close();
  });

  it('ensure by ID is idempotent: one create, then the sandbox is found by its effect ID and never created again', async () => {
    const id = 'ws-sbx-0000000000000000000a';
    let sub = await observe();
    const identity = sub.ensure(ws, id, OPTS, undefined);
    assert.deepEqual(sub.calls, [], 'nothing is sent for an effect that is not durably planned');
    assert.deepEqual(
      identity.map((o) => (o.op === 'apply' ? `${o.resource.kind}/${o.object.metadata.name ?? ''}` : o.op)),
      [`ServiceAccount/${id}`, `RoleBinding/${id}`],
      'the Node identity (named by the instance ID) is applied with the plan',
    );
    sub.ensure(ws, id, OPTS, planned(id));
    await perform(api, sub.calls);
    sub = await observe();
    const v = sub.sandbox(id);
    const [only] = [...srv.sandboxes.values()];
    assert.ok(v && only);
    assert.deepEqual(v, { id, externalId: only.id, ready: true, terminated: false, nodeId: `${id}-node` });
    assert.equal(only.request.env?.POD_NAME, id, 'the Node is told its sandbox instance ID');
    assert.deepEqual(only.request.volumes?.[0]?.pvc, { claimName: 'devws-ws-uid-1', createIfNotExists: true });
    sub.ensure(ws, id, OPTS, planned(id));
    await perform(api, sub.calls);
    assert.equal(srv.sandboxes.size, 1, 'exactly one sandbox');
    assert.equal(posts(), 1, 'exactly one create');
  });

  it('get by ID of a missing sandbox answers absent and creates nothing; another Project’s sandbox is never adopted', async () => {
    const id = 'ws-sbx-0000000000000000000b';
    await api.create({
      image: { uri: 'x' },
      entrypoint: ['true'],
      resourceLimits: { cpu: '1' },
      metadata: { [META.project]: 'other-project', [META.sandbox]: id },
    });
    const sub = await observe();
    assert.equal(sub.sandbox(id), undefined);
    assert.equal(sub.sandbox('ws-sbx-missing'), undefined);
    assert.deepEqual(sub.calls, []);
    assert.equal(posts(), 1, 'only the other Project’s create');
  });

  it('terminate: DELETE by the external ID, confirmed only by the server’s terminal state', async () => {
    const id = 'ws-sbx-0000000000000000000c';
    let sub = await observe();
    sub.ensure(ws, id, OPTS, planned(id));
    await perform(api, sub.calls);
    sub = await observe();
    const v = sub.sandbox(id);
    assert.ok(v && !v.terminated);
    srv.faults.deleteFails = true;
    sub.terminate(v);
    await perform(api, sub.calls);
    assert.equal((await observe()).sandbox(id)?.terminated, false, 'a failed DELETE is not termination');
    srv.faults.deleteFails = false;
    sub = await observe();
    const ops = sub.terminate(sub.sandbox(id)!);
    assert.deepEqual(
      ops.map((o) => (o.op === 'delete' ? `${o.resource.kind}/${o.name}` : o.op)),
      [`ServiceAccount/${id}`, `RoleBinding/${id}`],
      'the Node identity goes with the terminate call: its token stops authenticating',
    );
    await perform(api, sub.calls);
    const after = (await observe()).sandbox(id);
    assert.equal(after?.terminated, true);
    assert.equal(srv.sandboxes.get(v.externalId)?.status.state, 'Terminated');
  });

  it('timeout_never_read_as_not_executed: a create whose answer is lost is found by its ID; no second create in the landing time', async () => {
    const id = 'ws-sbx-0000000000000000000d';
    const logs: string[] = [];
    srv.faults.crashAfterCreate = 1;
    let sub = await observe();
    sub.ensure(ws, id, OPTS, planned(id));
    await perform(api, sub.calls, (m) => logs.push(m));
    assert.match(logs.join('\n'), /create ws-sbx-0+d: POST \/sandboxes/, 'the create got no answer');
    sub = await observe();
    assert.equal(sub.sandbox(id)?.externalId, [...srv.sandboxes.keys()][0], 'it landed and is found by its ID');
    sub.ensure(ws, id, OPTS, planned(id));
    assert.deepEqual(sub.calls, []);
    // A create that got no answer and is not listed (yet): after the send window, nothing is sent
    // until a create sent in the window has had time to land; only then a new intent.
    const e = planned('ws-sbx-0000000000000000000e');
    const at = (ms: number): Date => new Date(now.getTime() + ms);
    assert.equal(sub.createGate(e, at(SEND_WINDOW_MS)), 'send');
    assert.equal(sub.createGate(e, at(SEND_WINDOW_MS + 1)), 'wait');
    assert.equal(sub.createGate(e, at(SEND_WINDOW_MS + LANDING_MS - 1)), 'wait');
    assert.equal(sub.createGate(e, at(SEND_WINDOW_MS + LANDING_MS)), 'renew');
    assert.equal(posts(), 1);
  });

  it('two creates that landed for one ID: the oldest is the sandbox, the younger is deleted', async () => {
    const id = 'ws-sbx-0000000000000000000f';
    const first = await observe();
    first.ensure(ws, id, OPTS, planned(id));
    await perform(api, first.calls);
    await new Promise((r) => setTimeout(r, 5));
    await perform(api, first.calls); // a second send (e.g. after a host restart in the window)
    const sub = await observe();
    const [older, younger] = [...srv.sandboxes.values()];
    assert.ok(older && younger);
    assert.equal(sub.sandbox(id)?.externalId, older.id);
    assert.deepEqual(sub.duplicates(), [{ kind: 'delete', id, externalId: younger.id }]);
    await perform(api, sub.duplicates());
    assert.equal(srv.sandboxes.get(younger.id)?.status.state, 'Terminated');
    assert.equal((await observe()).sandbox(id)?.externalId, older.id, 'the external ID never changes');
  });

  it('workspace data is deleted by a wipe sandbox; removed only once it completed', async () => {
    const id = 'ws-ddel-00000000000000000001';
    const e: Effect = { id, kind: 'workspace_data_delete', leaseEpoch: 0, sentAt: now.toISOString() };
    let sub = await observe();
    assert.equal(sub.hasData(ws, e), true);
    sub.deleteData(ws, e);
    await perform(api, sub.calls);
    const [wipe] = [...srv.sandboxes.values()];
    assert.deepEqual(wipe?.request.entrypoint, ['find', '/home/dev', '-mindepth', '1', '-delete']);
    sub = await observe();
    assert.equal(sub.hasData(ws, e), true, 'still running');
    sub.deleteData(ws, e);
    assert.deepEqual(sub.calls, [], 'a running wipe is not sent again');
    srv.finish(wipe.id, true);
    assert.equal((await observe()).hasData(ws, e), false);
  });

  describe('the controller on an OpenSandbox Project', () => {
    const logs: string[] = [];
    const deps = (): OpenSandboxDeps => ({ api: () => api, policy: () => LOOPBACK, log: (m) => logs.push(m) });
    const project: Project = {
      metadata: { name: 'p1', namespace: NS, uid: PROJECT_UID },
      spec: { repository: { url: 'https://git.example/o/r.git', defaultBranch: 'main' }, substrate: 'opensandbox' },
      status: { lifecycle: 'provisioning', bindingId: PROJECT_UID },
    };
    let opUid = 0;
    const op = (): Operation => ({
      metadata: { name: 'p1-create', namespace: NS, uid: `op-uid-${++opUid}` },
      spec: { project: 'p1', workspace: 'p1-main', kind: 'create_project' },
      status: { state: 'running', step: 'sandbox', steps: ['sandbox', 'node', 'clone', 'done'] },
    });
    const state = (): FakeState =>
      new FakeState([
        [D.projects, project],
        [D.workspaces, { ...ws, status: { observedState: 'provisioning', admissionEpoch: 0, runtimeGeneration: 0 } }],
        [D.operations, op()],
        [
          D.configMaps,
          {
            metadata: { name: 'kruntimes-devws', namespace: 'kruntimes-system' },
            data: { openSandboxEndpoint: srv.url },
          },
        ],
        [
          R.secrets,
          {
            metadata: { name: OPENSANDBOX_SECRET, namespace: 'kruntimes-system' },
            data: { apiKey: Buffer.from(KEY).toString('base64') },
          },
        ],
      ]);
    const statusWrites = (s: FakeState, ops: FnOp[]): void => {
      for (const o of ops) if (o.op === 'status') s.put(o.resource, o.object);
    };
    const run = async (s: FakeState, t: Date): Promise<FnOp[]> => {
      const cur = s.get(D.operations, NS, 'p1-create');
      const ops = await handleWithSubstrate({ key: `${NS}/p1-create`, object: cur, state: s, now: t }, deps());
      statusWrites(s, ops);
      return ops;
    };
    const ensureOf = (s: FakeState): Effect | undefined =>
      (s.get(D.operations, NS, 'p1-create') as Operation).status?.effects?.find((e) => e.kind === 'sandbox_ensure');

    it('plans the effect first, then creates once, and records the server’s sandbox by its effect ID', async () => {
      const s = state();
      await run(s, now);
      assert.equal(posts(), 0, 'the plan is written before any create');
      const e = ensureOf(s);
      assert.equal(e?.sentAt, now.toISOString());
      srv.faults.listLag = true; // the server lists the new sandbox only later
      await run(s, now);
      await run(s, now);
      assert.equal(posts(), 1, 'one create per intent, even while it is not listed yet');
      srv.faults.listLag = false;
      await run(s, now);
      const recorded = ensureOf(s);
      const [sbx] = [...srv.sandboxes.values()];
      assert.equal(recorded?.outcome, 'succeeded');
      assert.equal(recorded?.externalId, sbx?.id);
      assert.equal(recorded?.nodeId, `${e?.id ?? ''}-node`);
      assert.equal((s.get(D.operations, NS, 'p1-create') as Operation).status?.step, 'node');
      assert.equal(srv.sandboxes.size, 1);
    });

    it('a list that gets no answer decides nothing (no create, no status write)', async () => {
      const s = state();
      await run(s, now);
      srv.faults.healthDown = true;
      const ops = await run(s, now);
      assert.deepEqual(ops, [{ op: 'requeue', afterMs: 5000 }]);
      assert.equal(posts(), 0);
      assert.match(logs.join('\n'), /nothing decided/);
      srv.faults.healthDown = false;
    });

    it('a substrate that answers too late: a create with no answer, listed only later, is waited for and recorded, never sent again', async () => {
      const s = state();
      await run(s, now);
      srv.faults.crashAfterCreate = 1; // stored, but the connection drops without an answer
      srv.faults.listLag = true; // and the list does not show it yet
      await run(s, now);
      assert.match(logs.join('\n'), /create ws-sbx-\w+: POST \/sandboxes/);
      assert.equal(posts(), 1);
      const t = (ms: number): Date => new Date(now.getTime() + ms);
      for (const at of [SEND_WINDOW_MS + 1000, SEND_WINDOW_MS + LANDING_MS - 1000]) {
        const ops = await run(s, t(at));
        assert.deepEqual(
          ops.filter((o) => o.op !== 'requeue'),
          [],
          'no write: not read as "did not happen"',
        );
      }
      assert.equal(posts(), 1, 'nothing sent again in the landing time');
      assert.equal(ensureOf(s)?.outcome, undefined);
      srv.faults.listLag = false;
      await run(s, t(SEND_WINDOW_MS + LANDING_MS - 500));
      const [sbx] = [...srv.sandboxes.values()];
      assert.equal(ensureOf(s)?.externalId, sbx?.id, 'the late sandbox is the one recorded');
      assert.equal(srv.sandboxes.size, 1);
    });
  });
});
