/**
 * The OpenSandbox adapter (functions/jobclass-opensandbox) end to end against the local
 * OpenSandbox-compatible server over real HTTP, with the typed client: every request it sends
 * must satisfy the vendored spec, and the server's faults (crash after create, full pool,
 * rotated key, health down) must never yield a second sandbox or a lost result.
 */
import assert from 'node:assert/strict';
import { OpenSandboxClient } from '../../lib/opensandbox/client.ts';
import { nodeTransport } from '../../lib/opensandbox/transport.ts';
import {
  JOB_UID_LABEL,
  SANDBOX_FINALIZER,
  type Job,
  type JobClass,
  type OpenSandboxParameters,
} from '../../lib/jobclass/api.ts';
import {
  FakeState,
  JobHost,
  NOW,
  R,
  X,
  acceptedOpenSandboxJob,
  jobClass,
  osParams,
  secret,
  statuses,
  withLiveReads,
} from '../../lib/jobclass/testing.ts';
import { reconcileClass } from '../../functions/jobclass-controller/core.ts';
import { reconcileWithEffects, type Deps } from '../../functions/jobclass-opensandbox/effects.ts';
import adapter from '../../functions/jobclass-opensandbox/index.ts';
import type { Operation, ReconcileInput } from '../../lib/fn/types.ts';
import { startOpenSandboxServer, type OpenSandboxTestServer } from './server.ts';

const POLICY = { insecureHosts: ['127.0.0.1'] };

function setup(
  srv: OpenSandboxTestServer,
  params: Partial<Parameters<typeof osParams>[1]> = {},
  key = 'key-1',
): { state: FakeState; deps: Deps } {
  const state = new FakeState([
    [X.jobClasses, jobClass('microvm', { controller: 'opensandbox' })],
    [X.openSandboxParameters, osParams('microvm', { endpoint: srv.url, ...params })],
    [R.secrets, secret('ayatori-system', 'opensandbox-api', { 'api-key': key })],
  ]);
  const deps: Deps = {
    policy: () => POLICY,
    api: (c) =>
      new OpenSandboxClient({ endpoint: c.endpoint, apiKey: c.apiKey, policy: POLICY, transport: nodeTransport() }),
  };
  return { state, deps };
}

const fetchDecl = adapter.trigger.type === 'watch' ? adapter.trigger.fetch : undefined;
/** The adapter as the relay hosts it: Secrets only through its declared live reads. */
const hosted = (deps: Deps): ((i: ReconcileInput) => Promise<Operation[]>) =>
  withLiveReads(fetchDecl, (i) => reconcileWithEffects(i, deps));
const host = (j: Job, s: { state: FakeState; deps: Deps }): JobHost => new JobHost(j, s.state, hosted(s.deps));
const sandboxID = (j: Job): string | undefined => j.status?.execution?.sandboxID;
const reason = (j: Job, type: string): string | undefined => j.status?.conditions?.find((c) => c.type === type)?.reason;

describe('OpenSandbox adapter against the local OpenSandbox server', () => {
  let srv: OpenSandboxTestServer;
  beforeEach(async () => {
    srv = await startOpenSandboxServer({ apiKeys: ['key-1'], insecure: true, pools: { microvm: 1 } });
  });
  afterEach(async () => {
    assert.deepEqual(srv.requestViolations, [], 'the adapter only sends spec-conformant requests');
    assert.deepEqual(srv.responseViolations, []);
    await srv.close();
  });

  it('runs a Job in one tagged sandbox and reports success', async () => {
    const h = host(acceptedOpenSandboxJob({ activeDeadlineSeconds: 600, args: ['--x'] }), setup(srv));
    await h.until((j) => j.status?.phase === 'Running');
    const [s] = [...srv.sandboxes.values()];
    assert.equal(s?.request.metadata?.[JOB_UID_LABEL], 'juid-train');
    assert.deepEqual(
      [s?.request.extensions, s?.request.entrypoint, s?.request.timeout, s?.request.resourceLimits],
      [undefined, ['sh', '-c', 'echo hi', '--x'], 600, { cpu: '2', memory: '2Gi' }],
    );
    srv.finish(s.id, true);
    await h.until((j) => j.status?.phase === 'Succeeded');
    await h.until((j) => !j.metadata.finalizers?.includes(SANDBOX_FINALIZER));
    assert.equal(srv.sandboxes.size, 1);
  });

  it('never creates a second sandbox when the server crashes after storing a create', async () => {
    srv.faults.crashAfterCreate = 1;
    const h = host(acceptedOpenSandboxJob(), setup(srv));
    await h.until((j) => !!sandboxID(j));
    assert.equal(srv.sandboxes.size, 1);
    assert.equal(srv.calls.filter((c) => c.method === 'POST').length, 1);
    assert.equal(sandboxID(h.job), [...srv.sandboxes.keys()][0]);
  });

  it('maps a full pool (429) to PoolExhausted and creates when capacity frees up', async () => {
    const s = setup(srv, { poolRef: 'microvm' });
    const blocker = await new OpenSandboxClient({ endpoint: srv.url, apiKey: 'key-1', policy: POLICY }).create({
      entrypoint: ['sleep'],
      extensions: { poolRef: 'microvm' },
    });
    const h = host(acceptedOpenSandboxJob(), s);
    await h.until((j) => reason(j, 'Scheduled') === 'PoolExhausted');
    assert.match(h.job.status?.message ?? '', /pool microvm has no free capacity/);
    srv.finish(blocker.id, true);
    await h.until((j) => !!sandboxID(j));
    assert.equal(
      [...srv.sandboxes.values()].find((x) => x.id === sandboxID(h.job))?.request.extensions?.poolRef,
      'microvm',
    );
  });

  it('survives API key rotation: ResultUnknown while the old key is rejected, recovery with the new Secret', async () => {
    const s = setup(srv);
    const h = host(acceptedOpenSandboxJob(), s);
    await h.until((j) => j.status?.phase === 'Running');
    srv.setApiKeys(['key-2']);
    await h.step();
    assert.deepEqual([h.job.status?.phase, reason(h.job, 'ResultUnknown')], ['Unknown', 'BackendAuthenticationFailed']);
    s.state.put(R.secrets, secret('ayatori-system', 'opensandbox-api', { 'api-key': 'key-2' }, 'Opaque', '8'));
    await h.until((j) => j.status?.phase === 'Running');
    assert.equal(srv.sandboxes.size, 1);
    assert.ok(!JSON.stringify(h.job).includes('key-2'));
  });

  it('keeps observing and deleting a sandbox on its recorded server after the endpoint moves to another one', async () => {
    const other = await startOpenSandboxServer({ apiKeys: ['key-b'], insecure: true, pools: { microvm: 1 } });
    try {
      const s = setup(srv);
      const h = host(acceptedOpenSandboxJob({ activeDeadlineSeconds: 600 }), s);
      await h.until((j) => j.status?.phase === 'Running');
      const moved = osParams('microvm', { endpoint: other.url });
      moved.spec.apiKeySecretRef = { namespace: 'ayatori-system', name: 'opensandbox-b', key: 'api-key' };
      s.state.put(R.secrets, secret('ayatori-system', 'opensandbox-b', { 'api-key': 'key-b' }));
      s.state.put(X.openSandboxParameters, moved);
      const before = srv.calls.length;
      await h.step();
      assert.equal(h.job.status?.phase, 'Running', 'still observed on the recorded server');
      assert.ok(srv.calls.length > before);
      assert.deepEqual([other.calls.length, other.sandboxes.size], [0, 0], 'the new server is never asked');
      h.job = { ...h.job, metadata: { ...h.job.metadata, deletionTimestamp: NOW.toISOString() } };
      await h.until((j) => !j.metadata.finalizers?.includes(SANDBOX_FINALIZER));
      assert.equal([...srv.sandboxes.values()][0]?.status.state, 'Terminated', 'the sandbox is not orphaned');
      assert.deepEqual([other.calls.length, other.sandboxes.size], [0, 0]);
    } finally {
      await other.close();
    }
  });

  it('drives class Ready from backend probes: health down blocks new executions, recovery unblocks them', async () => {
    const s = setup(srv);
    const probe = async (): Promise<void> => {
      const ops = await hosted(s.deps)({ key: '@params:microvm', object: undefined, state: s.state, now: NOW });
      const p = s.state.get(X.openSandboxParameters, undefined, 'microvm') as OpenSandboxParameters;
      s.state.put(X.openSandboxParameters, { ...p, status: statuses(ops)[0] });
    };
    const classReady = (): string | undefined => {
      const c = { ...jobClass('microvm', { controller: 'opensandbox' }), status: {} } as JobClass;
      const st = statuses(
        reconcileClass(c, { state: s.state, now: NOW, endpointPolicy: POLICY }),
      )[0] as JobClass['status'];
      s.state.put(X.jobClasses, { ...c, status: st });
      return st?.conditions?.find((x) => x.type === 'Ready')?.reason;
    };
    srv.faults.healthDown = true;
    await probe();
    assert.equal(classReady(), 'BackendUnhealthy');
    const h = host(acceptedOpenSandboxJob(), s);
    for (let i = 0; i < 4; i++) await h.step();
    assert.deepEqual([srv.sandboxes.size, reason(h.job, 'Scheduled')], [0, 'BackendUnreachable']);
    srv.faults.healthDown = false;
    await h.step();
    assert.equal(reason(h.job, 'Scheduled'), 'JobClassNotReady', 'the class is still not Ready: no new execution');
    await probe();
    assert.equal(classReady(), 'BackendReachable');
    await h.until((j) => !!sandboxID(j));
    assert.equal(srv.sandboxes.size, 1);
  });

  it('sends Secret env and registry credentials only with the allowances, and cancels by deleting the sandbox', async () => {
    const s = setup(srv, { allowSecretEnv: true, allowImageAuth: true });
    s.state.put(R.secrets, secret('team-a', 'db', { pw: 'hunter2' }));
    s.state.put(
      R.secrets,
      secret(
        'team-a',
        'regcred',
        {
          '.dockerconfigjson': JSON.stringify({ auths: { 'registry.example.com': { username: 'u', password: 'p' } } }),
        },
        'kubernetes.io/dockerconfigjson',
      ),
    );
    const j = acceptedOpenSandboxJob({
      image: 'registry.example.com/app:1',
      env: [{ name: 'PW', valueFrom: { secretKeyRef: { name: 'db', key: 'pw' } } }],
      imagePullSecret: { name: 'regcred' },
    });
    const h = host(j, s);
    await h.until((x) => !!sandboxID(x));
    const stored = srv.sandboxes.get(sandboxID(h.job)!);
    assert.deepEqual(
      [stored?.request.env, stored?.request.image],
      [{ PW: 'hunter2' }, { uri: 'registry.example.com/app:1', auth: { username: 'u', password: 'p' } }],
    );
    assert.ok(!JSON.stringify(h.job.status).includes('hunter2'));
    h.job = { ...h.job, spec: { ...h.job.spec, cancelRequested: true } };
    await h.until((x) => x.status?.phase === 'Failed');
    assert.deepEqual([reason(h.job, 'Failed'), stored?.status.state], ['Cancelled', 'Terminated']);
  });
});
