/**
 * JobClass execution on the real cluster: class resolution (explicit, default, none, several),
 * frozen resolution, resource policy, the Kubernetes adapter through the real job controller and
 * node agent (ServiceAccount from the parameters, never the default one), admission rejections,
 * cancel; and the OpenSandbox adapter against the local spec-validating OpenSandbox server
 * (one tagged sandbox, exactly one sandbox after a crash between create and status write,
 * pool exhaustion reported and retried, API key rotation without restart, backend health loss
 * and recovery, a deleted and recreated API key Secret). Transition Events are asserted for a Kubernetes-adapter Job.
 */
import assert from 'node:assert/strict';
import { isApiError } from '../lib/kube/errors.ts';
import { E2E_HOST_ADDRESS } from './cluster.ts';
import { admin, deleteNamespace, eventually, newNamespace, type Obj } from './helpers.ts';
import {
  apply,
  cond,
  eventually404,
  executionsOf,
  getJob,
  job,
  kubernetesClass,
  serviceAccount,
  uniq,
  until,
  X,
  type Cond,
  type Event,
  type Job,
} from './jobclass-fixtures.ts';
import { startOpenSandboxServer, type OpenSandboxTestServer } from './opensandbox-server/server.ts';

describe('JobClass execution: Kubernetes adapter', function () {
  let ns: string;
  const cls = `e2e-k8s-${uniq}`;
  before(async () => {
    ns = await newNamespace('jc');
    await admin().create(`/api/v1/namespaces/${ns}/serviceaccounts`, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'jobs-runner' },
    });
    await apply(`${X}/kubernetesexecutionparameters`, {
      apiVersion: 'execution.ayatori.ddupan.top/v1alpha1',
      kind: 'KubernetesExecutionParameters',
      metadata: { name: `${cls}-params` },
      spec: { serviceAccountName: 'jobs-runner' },
    });
    await apply(
      `${X}/jobclasses`,
      kubernetesClass(cls, `${cls}-params`, {
        spec: {
          resources: {
            defaults: { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '500m', memory: '256Mi' } },
            maximum: { limits: { cpu: '2', memory: '1Gi' } },
          },
        },
      }),
    );
    await eventually('the class Ready', async () =>
      (await admin().get<Job>(`${X}/jobclasses/${cls}`)).status?.conditions?.some(
        (c) => c.type === 'Ready' && c.status === 'True',
      ),
    );
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it("runs a Job as a batch/v1 Job with the parameters' ServiceAccount, freezes the class and the effective resources", async () => {
    await job(ns, 'hello', { jobClassName: cls, image: 'bash:5', command: ['bash', '-c', 'echo hello from JobClass'] });
    const j = await until(ns, 'hello', (x) => x.status?.phase === 'Succeeded', 'Succeeded');
    const c = await admin().get<Obj>(`${X}/jobclasses/${cls}`);
    assert.equal(j.status?.resolvedJobClass?.name, cls);
    assert.equal(j.status?.resolvedJobClass?.uid, c.metadata.uid);
    assert.ok(j.status?.resolvedJobClass?.parametersRef?.uid, 'the parameters object UID is frozen too');
    assert.equal(j.status?.resolvedJobClass?.controllerName, 'execution.ayatori.ddupan.top/kubernetes');
    assert.deepEqual(j.status?.effectiveResources, {
      requests: { cpu: '100m', memory: '64Mi' },
      limits: { cpu: '500m', memory: '256Mi' },
    });
    const bj = await admin().get<Obj & { spec: { template: { spec: { serviceAccountName: string } } } }>(
      `/apis/batch/v1/namespaces/${ns}/jobs/${j.status?.execution?.name}`,
    );
    assert.equal(bj.spec.template.spec.serviceAccountName, 'jobs-runner');
    assert.equal(bj.metadata.ownerReferences?.[0]?.kind, 'Job');
  });

  it('writes a core/v1 Event on the Job for each transition (Accepted, Scheduled, terminal)', async () => {
    await job(ns, 'evented', { jobClassName: cls, image: 'bash:5', command: ['true'] });
    const j = await until(ns, 'evented', (x) => x.status?.phase === 'Succeeded', 'Succeeded');
    const want = [
      ['Accepted', /^Accepted=True: /],
      ['ExecutionCreated', /^Scheduled=True: /],
      ['Completed', /^Succeeded=True: /],
    ] as const;
    const events = await eventually('the transition Events', async () => {
      const list = await admin().list<Event>(`/api/v1/namespaces/${ns}/events`);
      const mine = list.items.filter((e) => e.involvedObject.uid === j.metadata.uid);
      return want.every(([reason]) => mine.some((e) => e.reason === reason)) ? mine : undefined;
    });
    for (const [reason, message] of want) {
      const e = events.filter((x) => x.reason === reason);
      assert.equal(e.length, 1, `exactly one ${reason} Event`);
      assert.equal(e[0]?.type, 'Normal');
      assert.equal(e[0]?.involvedObject.kind, 'Job');
      assert.match(e[0]?.message ?? '', message);
    }
  });

  it("does not schedule without the parameters' ServiceAccount (never the default one)", async () => {
    const other = await newNamespace('jc-nosa');
    try {
      await job(other, 'no-sa', { jobClassName: cls, image: 'bash:5', command: ['true'] });
      const j = await until(
        other,
        'no-sa',
        (x) => cond(x, 'Scheduled')?.reason === 'ServiceAccountNotFound',
        'ServiceAccountNotFound',
      );
      assert.equal(cond(j, 'Scheduled')?.status, 'False');
      assert.equal(
        cond(j, 'Accepted')?.status,
        'True',
        'a missing ServiceAccount is a scheduling wait, not a rejection',
      );
      assert.match(
        cond(j, 'Scheduled')?.message ?? '',
        new RegExp(`ServiceAccount ${other}/jobs-runner does not exist.*the default ServiceAccount is never used`),
      );
      assert.deepEqual(
        await executionsOf(other, j.metadata.uid),
        { batchJobs: [], pods: [] },
        'no batch Job and no Pod (no fallback to the default ServiceAccount)',
      );
      // Provisioning the ServiceAccount later releases the Job, which then runs under it.
      await serviceAccount(other);
      const done = await until(
        other,
        'no-sa',
        (x) => x.status?.phase === 'Succeeded',
        'Succeeded once the ServiceAccount exists',
      );
      const { batchJobs } = await executionsOf(other, done.metadata.uid);
      assert.deepEqual(
        batchJobs.map((b) => b.spec.template.spec.serviceAccountName),
        ['jobs-runner'],
      );
    } finally {
      await deleteNamespace(other);
    }
  });

  it('rejects at admission an unknown class and resources above the class maximum', async () => {
    await assert.rejects(
      job(ns, 'unknown-class', { jobClassName: 'no-such-class', image: 'bash:5', command: ['true'] }),
      (e: unknown) => isApiError(e) && /no-such-class/.test(e.message),
    );
    await assert.rejects(
      job(ns, 'too-big', {
        jobClassName: cls,
        image: 'bash:5',
        command: ['true'],
        resources: { limits: { cpu: '8' } },
      }),
      (e: unknown) => isApiError(e) && /cpu/.test(e.message),
    );
  });

  it('cancels a running Job', async () => {
    await job(ns, 'long', { jobClassName: cls, image: 'bash:5', command: ['bash', '-c', 'sleep 60'] });
    await until(ns, 'long', (x) => x.status?.phase === 'Running', 'Running');
    await admin().patch(`${X}/namespaces/${ns}/jobs/long`, { spec: { cancelRequested: true } });
    const j = await until(ns, 'long', (x) => x.status?.phase === 'Failed', 'Failed (cancelled)', 90_000);
    assert.match(JSON.stringify(j.status?.conditions), /Cancel/);
  });
});

describe('JobClass execution: OpenSandbox adapter (local spec-validating server)', function () {
  let ns: string;
  let srv: OpenSandboxTestServer;
  const cls = `e2e-os-${uniq}`;
  before(async () => {
    ns = await newNamespace('jcos');
    srv = await startOpenSandboxServer({
      apiKeys: ['key-1'],
      insecure: true,
      pools: { small: 1 },
      host: E2E_HOST_ADDRESS,
    });
    await admin().create(`/api/v1/namespaces/${ns}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'opensandbox-api' },
      stringData: { 'api-key': 'key-1' },
    });
    for (const [name, pool] of [
      [cls, undefined],
      [`${cls}-pool`, 'small'],
    ] as const) {
      await apply(`${X}/opensandboxexecutionparameters`, {
        apiVersion: 'execution.ayatori.ddupan.top/v1alpha1',
        kind: 'OpenSandboxExecutionParameters',
        metadata: { name: `${name}-params` },
        spec: {
          endpoint: srv.url,
          apiKeySecretRef: { namespace: ns, name: 'opensandbox-api', key: 'api-key' },
          ...(pool ? { poolRef: pool } : {}),
        },
      });
      await apply(`${X}/jobclasses`, {
        apiVersion: 'execution.ayatori.ddupan.top/v1alpha1',
        kind: 'JobClass',
        metadata: { name },
        spec: {
          controllerName: 'execution.ayatori.ddupan.top/opensandbox',
          parametersRef: {
            group: 'execution.ayatori.ddupan.top',
            kind: 'OpenSandboxExecutionParameters',
            name: `${name}-params`,
          },
          resources: { defaults: { requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '1', memory: '1Gi' } } },
        },
      });
      await eventually(
        `class ${name} Ready`,
        async () =>
          (await admin().get<Job>(`${X}/jobclasses/${name}`)).status?.conditions?.some(
            (c) => c.type === 'Ready' && c.status === 'True',
          ),
        90_000,
      );
    }
  });
  after(async () => {
    assert.deepEqual(srv.requestViolations, [], 'every request conformed to the vendored OpenAPI spec');
    await deleteNamespace(ns);
    await srv.close();
  });

  it('runs a Job in one sandbox tagged with the Job UID and reports the result', async () => {
    await job(ns, 'sbx', { jobClassName: cls, image: 'python:3.12', command: ['python3', '-c', 'print(1)'] });
    const running = await until(ns, 'sbx', (x) => !!x.status?.execution?.sandboxID, 'a sandbox');
    const sb = srv.sandboxes.get(running.status?.execution?.sandboxID ?? '');
    assert.equal(sb?.request.metadata?.['execution.ayatori.ddupan.top/job-uid'], running.metadata.uid);
    srv.finish(sb!.id, true);
    await until(ns, 'sbx', (x) => x.status?.phase === 'Succeeded', 'Succeeded');
    assert.ok(!JSON.stringify(await getJob(ns, 'sbx')).includes('key-1'), 'the API key never appears in status');
  });

  it('creates exactly one sandbox when the server crashes between create and response', async () => {
    srv.faults.crashAfterCreate = 1;
    await job(ns, 'crash', { jobClassName: cls, image: 'python:3.12', command: ['true'] });
    const adopted = await until(ns, 'crash', (x) => !!x.status?.execution?.sandboxID, 'a sandbox');
    assert.equal(srv.faults.crashAfterCreate, 0, 'the create really crashed after storing the sandbox');
    // Finishing the Job is the sync point: a finished Job never creates again, so the count is final.
    srv.finish(adopted.status!.execution!.sandboxID!, true);
    const done = await until(ns, 'crash', (x) => x.status?.phase === 'Succeeded', 'Succeeded');
    const tagged = [...srv.sandboxes.values()]
      .filter((s) => s.request.metadata?.['execution.ayatori.ddupan.top/job-uid'] === done.metadata.uid)
      .map((s) => s.id);
    assert.deepEqual(tagged, [adopted.status!.execution!.sandboxID!], 'exactly one sandbox, the adopted one');
  });

  it('reports pool exhaustion (HTTP 429) as a clear, retried condition that never flips Ready', async () => {
    const classReady = async (): Promise<Cond | undefined> =>
      cond(await admin().get<Job>(`${X}/jobclasses/${cls}-pool`), 'Ready');
    const readyBefore = await classReady();
    await job(ns, 'first', { jobClassName: `${cls}-pool`, image: 'python:3.12', command: ['true'] });
    const first = await until(ns, 'first', (x) => !!x.status?.execution?.sandboxID, 'a sandbox');
    await job(ns, 'second', { jobClassName: `${cls}-pool`, image: 'python:3.12', command: ['true'] });
    const waiting = await until(ns, 'second', (x) => cond(x, 'Scheduled')?.reason === 'PoolExhausted', 'PoolExhausted');
    assert.match(waiting.status?.message ?? cond(waiting, 'Scheduled')?.message ?? '', /pool small/);
    // Seed 001: Ready is an observation, not a capacity reservation; a 429 is not a Ready flip.
    const readyAfter = await classReady();
    assert.deepEqual(
      [readyAfter?.status, readyAfter?.lastTransitionTime],
      ['True', readyBefore?.lastTransitionTime],
      'the class stayed Ready through the 429s, without a transition',
    );
    assert.deepEqual(
      [cond(waiting, 'Accepted')?.status, waiting.status?.phase, cond(waiting, 'ResultUnknown')],
      ['True', 'Pending', undefined],
      'the Job stays accepted and pending',
    );
    srv.finish(first.status!.execution!.sandboxID!, true);
    await until(ns, 'second', (x) => !!x.status?.execution?.sandboxID, 'a sandbox once capacity frees', 90_000);
  });
});

describe('JobClass execution: OpenSandbox API key rotation and backend health (local server)', function () {
  let ns: string;
  let srv: OpenSandboxTestServer;
  const cls = `e2e-osh-${uniq}`;
  const secretPath = (): string => `/api/v1/namespaces/${ns}/secrets/opensandbox-api`;
  const sandboxesOf = (uid: string | undefined): string[] =>
    [...srv.sandboxes.values()]
      .filter((s) => s.request.metadata?.['execution.ayatori.ddupan.top/job-uid'] === uid)
      .map((s) => s.id);
  const ready = async (): Promise<Cond | undefined> => cond(await admin().get<Job>(`${X}/jobclasses/${cls}`), 'Ready');
  const run = (name: string): Promise<void> =>
    job(ns, name, { jobClassName: cls, image: 'python:3.12', command: ['python3', '-c', 'print(1)'] });
  const sandboxed = async (name: string): Promise<Job> =>
    until(ns, name, (x) => !!x.status?.execution?.sandboxID, 'a sandbox', 90_000);
  before(async () => {
    ns = await newNamespace('jcrot');
    srv = await startOpenSandboxServer({ apiKeys: ['key-1'], insecure: true, host: E2E_HOST_ADDRESS });
    await admin().create(`/api/v1/namespaces/${ns}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'opensandbox-api' },
      stringData: { 'api-key': 'key-1' },
    });
    await apply(`${X}/opensandboxexecutionparameters`, {
      apiVersion: 'execution.ayatori.ddupan.top/v1alpha1',
      kind: 'OpenSandboxExecutionParameters',
      metadata: { name: `${cls}-params` },
      spec: { endpoint: srv.url, apiKeySecretRef: { namespace: ns, name: 'opensandbox-api', key: 'api-key' } },
    });
    await apply(`${X}/jobclasses`, {
      apiVersion: 'execution.ayatori.ddupan.top/v1alpha1',
      kind: 'JobClass',
      metadata: { name: cls },
      spec: {
        controllerName: 'execution.ayatori.ddupan.top/opensandbox',
        parametersRef: {
          group: 'execution.ayatori.ddupan.top',
          kind: 'OpenSandboxExecutionParameters',
          name: `${cls}-params`,
        },
        resources: { defaults: { requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '1', memory: '1Gi' } } },
      },
    });
    await eventually(`class ${cls} Ready`, async () => (await ready())?.status === 'True', 90_000);
  });
  after(async () => {
    assert.deepEqual(srv.requestViolations, [], 'every request conformed to the vendored OpenAPI spec');
    assert.deepEqual(srv.responseViolations, []);
    await deleteNamespace(ns);
    await srv.close();
  });

  it('picks up a rotated API key without a restart and keeps observing and creating', async () => {
    await run('rot-a');
    const a = await sandboxed('rot-a');
    // Overlapping rotation: the server accepts both keys, the Secret moves to key-2, then key-1 is revoked.
    srv.setApiKeys(['key-1', 'key-2']);
    await admin().patch(secretPath(), { stringData: { 'api-key': 'key-2' } });
    await eventually(
      'a call with the new key',
      () => Promise.resolve(srv.calls.some((c) => c.key === 'key-2')),
      60_000,
    );
    srv.setApiKeys(['key-2']);
    const mark = srv.calls.length;
    srv.finish(a.status!.execution!.sandboxID!, true);
    await until(ns, 'rot-a', (x) => x.status?.phase === 'Succeeded', 'Succeeded after the rotation');
    await run('rot-b');
    const b = await sandboxed('rot-b');
    srv.finish(b.status!.execution!.sandboxID!, true);
    await until(ns, 'rot-b', (x) => x.status?.phase === 'Succeeded', 'Succeeded with the new key');
    const after = srv.calls.slice(mark);
    assert.ok(after.length >= 2);
    assert.deepEqual(
      after.filter((c) => c.key !== 'key-2' || c.status === 401),
      [],
      'every call after the revocation used the new key',
    );
    assert.equal((await ready())?.status, 'True', 'an overlapping rotation never makes the class not Ready');

    // Hard cut: the server only knows key-3 before the Secret has it; the running Job is not
    // lost or re-created, and everything resumes once the Secret carries key-3.
    await run('rot-c');
    const c = await sandboxed('rot-c');
    srv.setApiKeys(['key-3']);
    await until(
      ns,
      'rot-c',
      (x) => cond(x, 'ResultUnknown')?.reason === 'BackendAuthenticationFailed',
      'ResultUnknown while the key is rejected',
      60_000,
    );
    await admin().patch(secretPath(), { stringData: { 'api-key': 'key-3' } });
    await until(
      ns,
      'rot-c',
      (x) => cond(x, 'ResultUnknown')?.status === 'False',
      'observed again with the new key',
      60_000,
    );
    srv.finish(c.status!.execution!.sandboxID!, true);
    const done = await until(ns, 'rot-c', (x) => x.status?.phase === 'Succeeded', 'Succeeded');
    assert.deepEqual(sandboxesOf(done.metadata.uid), [c.status!.execution!.sandboxID!], 'never re-created');
    await eventually('class Ready with key-3', async () => (await ready())?.status === 'True', 60_000);
    for (const name of ['rot-a', 'rot-b', 'rot-c'])
      assert.ok(!JSON.stringify(await getJob(ns, name)).match(/key-[123]/), 'no API key in Job status');
  });

  it('health: an unhealthy server makes the class not Ready and holds new Jobs while existing ones are observed, cancelled and deleted; recovery releases them', async () => {
    await run('h-finish');
    await run('h-cancel');
    await run('h-delete');
    const fin = await sandboxed('h-finish');
    const can = await sandboxed('h-cancel');
    const del = await sandboxed('h-delete');
    srv.faults.unhealthy = true;
    await eventually(
      'class Ready=False/BackendUnhealthy',
      async () => (await ready())?.reason === 'BackendUnhealthy',
      100_000,
    );
    await run('h-new');
    const waiting = await until(
      ns,
      'h-new',
      (x) => cond(x, 'Scheduled')?.reason === 'JobClassNotReady',
      'Scheduled=False/JobClassNotReady',
    );
    assert.equal(cond(waiting, 'Accepted')?.status, 'True', 'not Ready is not a reason to reject the Job');
    srv.finish(fin.status!.execution!.sandboxID!, true);
    await until(ns, 'h-finish', (x) => x.status?.phase === 'Succeeded', 'an existing Job is still observed');
    await admin().patch(`${X}/namespaces/${ns}/jobs/h-cancel`, { spec: { cancelRequested: true } });
    const cancelled = await until(
      ns,
      'h-cancel',
      (x) => x.status?.phase === 'Failed',
      'an existing Job is still cancelled',
    );
    assert.equal(cond(cancelled, 'Failed')?.reason, 'Cancelled');
    assert.equal(
      srv.sandboxes.get(can.status!.execution!.sandboxID!)?.status.reason,
      'user_delete',
      'the sandbox was deleted',
    );
    await admin().delete(`${X}/namespaces/${ns}/jobs/h-delete`);
    await eventually404(
      'an existing Job is still deleted (its cleanup finalizer released)',
      `${X}/namespaces/${ns}/jobs/h-delete`,
    );
    assert.equal(
      srv.sandboxes.get(del.status!.execution!.sandboxID!)?.status.reason,
      'user_delete',
      'its sandbox was deleted first',
    );
    assert.equal(
      (await ready())?.reason,
      'BackendUnhealthy',
      'all of the above happened while the class was not Ready',
    );
    assert.deepEqual(sandboxesOf(waiting.metadata.uid), [], 'no execution was started for the new Job');

    srv.faults.unhealthy = false;
    await eventually('class Ready again', async () => (await ready())?.status === 'True', 60_000);
    const started = await sandboxed('h-new');
    srv.finish(started.status!.execution!.sandboxID!, true);
    await until(ns, 'h-new', (x) => x.status?.phase === 'Succeeded', 'the pending Job ran after recovery');
  });

  it('a deleted API key Secret makes the class not Ready (seen by the probe; Secrets are not watched) and holds new Jobs until it is back', async () => {
    const key = (await admin().get<Obj & { data: Record<string, string> }>(secretPath())).data['api-key'];
    await admin().delete(secretPath());
    await eventually(
      'class Ready=False/ApiKeySecretNotFound',
      async () => (await ready())?.reason === 'ApiKeySecretNotFound',
      100_000,
    );
    await run('no-key');
    const waiting = await until(
      ns,
      'no-key',
      (x) => cond(x, 'Scheduled')?.reason === 'ApiKeySecretNotFound',
      'Scheduled=False/ApiKeySecretNotFound',
    );
    assert.deepEqual(sandboxesOf(waiting.metadata.uid), []);
    await admin().create(`/api/v1/namespaces/${ns}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'opensandbox-api' },
      data: { 'api-key': key },
    });
    await eventually('class Ready again', async () => (await ready())?.status === 'True', 60_000);
    const started = await sandboxed('no-key');
    srv.finish(started.status!.execution!.sandboxID!, true);
    await until(ns, 'no-key', (x) => x.status?.phase === 'Succeeded', 'the Job ran once the Secret was back');
  });
});
