/**
 * Seed 001 "Job 中已持久化的 execution reference 始终优先" on the real cluster: an
 * OpenSandboxExecutionParameters endpoint change (failover to a second OpenSandbox-compatible
 * server with its own API key Secret) while Jobs are in every state — a create whose outcome is
 * still unknown (pending intent), running, finished and being deleted. Each keeps using the
 * backend recorded in status.execution: the pending create is adopted on the old server (never a
 * second sandbox on the new one), the running Job is still observed to completion, the deleted
 * Job's sandbox is deleted on the old server before its finalizer goes, and no sandbox is left
 * live; only a Job created after the change runs on the new server.
 */
import assert from 'node:assert/strict';
import { admin, deleteNamespace, eventually, newNamespace, type Obj } from './helpers.ts';
import { apply, cond, eventually404, job, uniq, until, X, type Job } from './jobclass-fixtures.ts';
import { startOpenSandboxServer, type OpenSandboxTestServer } from './opensandbox-server/server.ts';

const UID_TAG = 'execution.ayatori.ddupan.top/job-uid';

describe('JobClass execution: an OpenSandbox endpoint change keeps every Job on its recorded backend', function () {
  let ns: string;
  let a: OpenSandboxTestServer;
  let b: OpenSandboxTestServer;
  const cls = `e2e-osep-${uniq}`;
  const params = `${cls}-params`;
  const tagged = (srv: OpenSandboxTestServer, uid: string | undefined): string[] =>
    [...srv.sandboxes.values()].filter((s) => s.request.metadata?.[UID_TAG] === uid).map((s) => s.id);
  const run = (name: string): Promise<void> =>
    job(ns, name, { jobClassName: cls, image: 'python:3.12', command: ['python3', '-c', 'print(1)'] });
  const sandboxed = (name: string): Promise<Job> =>
    until(ns, name, (x) => !!x.status?.execution?.sandboxID, 'a sandbox', 90_000);
  const secret = (name: string, key: string): Promise<unknown> =>
    admin().create(`/api/v1/namespaces/${ns}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name },
      stringData: { 'api-key': key },
    });
  const paramsOn = (srv: OpenSandboxTestServer, secretName: string): Record<string, unknown> => ({
    apiVersion: 'execution.ayatori.ddupan.top/v1alpha1',
    kind: 'OpenSandboxExecutionParameters',
    metadata: { name: params },
    spec: { endpoint: srv.url, apiKeySecretRef: { namespace: ns, name: secretName, key: 'api-key' } },
  });

  before(async () => {
    ns = await newNamespace('jcep');
    a = await startOpenSandboxServer({ apiKeys: ['key-a'], insecure: true });
    b = await startOpenSandboxServer({ apiKeys: ['key-b'], insecure: true });
    await secret('opensandbox-a', 'key-a');
    await secret('opensandbox-b', 'key-b');
    await apply(`${X}/opensandboxexecutionparameters`, paramsOn(a, 'opensandbox-a'));
    await apply(`${X}/jobclasses`, {
      apiVersion: 'execution.ayatori.ddupan.top/v1alpha1',
      kind: 'JobClass',
      metadata: { name: cls },
      spec: {
        controllerName: 'execution.ayatori.ddupan.top/opensandbox',
        parametersRef: { group: 'execution.ayatori.ddupan.top', kind: 'OpenSandboxExecutionParameters', name: params },
        resources: { defaults: { requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '1', memory: '1Gi' } } },
      },
    });
    await eventually(
      `class ${cls} Ready`,
      async () => cond(await admin().get<Job>(`${X}/jobclasses/${cls}`), 'Ready')?.status === 'True',
      90_000,
    );
  });
  after(async () => {
    for (const srv of [a, b]) {
      assert.deepEqual(srv.requestViolations, [], 'every request conformed to the vendored OpenAPI spec');
      assert.deepEqual(srv.responseViolations, []);
    }
    await deleteNamespace(ns);
    await a.close();
    await b.close();
  });

  it('pending create, running, finished and deleting Jobs all stay on the old server; new Jobs use the new one', async () => {
    // finished
    await run('finished');
    const finished = await sandboxed('finished');
    a.finish(finished.status!.execution!.sandboxID!, true);
    await until(ns, 'finished', (x) => x.status?.phase === 'Succeeded', 'Succeeded');
    // running
    await run('running');
    const running = await sandboxed('running');
    // deleting: its cleanup DELETE fails until the old server is released below
    await run('deleting');
    const deleting = await sandboxed('deleting');
    a.faults.deleteFails = true;
    await admin().delete(`${X}/namespaces/${ns}/jobs/deleting`);
    const deletePath = `/v1/sandboxes/${deleting.status!.execution!.sandboxID!}`;
    await eventually('the cleanup DELETE was tried and failed', () =>
      Promise.resolve(a.calls.some((c) => c.method === 'DELETE' && c.path === deletePath && c.status === 500)),
    );
    // pending create: every create lands but its answer is lost and lists lag, so the intent stays Pending
    a.faults.listLag = true;
    a.faults.crashAfterCreate = 1_000;
    await run('pending');
    const pending = await until(
      ns,
      'pending',
      (x) =>
        x.status?.execution?.createIntent?.outcome === 'Pending' &&
        cond(x, 'Scheduled')?.reason === 'CreateOutcomeUnknown',
      'a create whose outcome is unknown',
    );
    assert.ok(tagged(a, pending.metadata.uid).length >= 1, 'the create reached the old server');
    for (const j of [running, deleting, pending])
      assert.equal(j.status?.execution?.endpoint, a.url, `${j.metadata.name} recorded the old endpoint`);

    // Failover: the parameters now name server B with its own key Secret.
    await admin().patch(`${X}/opensandboxexecutionparameters/${params}`, paramsOn(b, 'opensandbox-b'));
    await eventually(
      'the adapter probed the new endpoint',
      async () =>
        (
          await admin().get<Obj & { status?: { probe?: { endpoint?: string } } }>(
            `${X}/opensandboxexecutionparameters/${params}`,
          )
        ).status?.probe?.endpoint === b.url,
      90_000,
    );
    await run('fresh');
    const fresh = await sandboxed('fresh');
    assert.equal(fresh.status?.execution?.endpoint, b.url, 'a new Job runs on the new backend');
    assert.deepEqual(tagged(b, fresh.metadata.uid), [fresh.status.execution.sandboxID!]);

    // running: still observed on the old server (not ResultUnknown), to completion
    a.finish(running.status!.execution!.sandboxID!, true);
    await until(ns, 'running', (x) => x.status?.phase === 'Succeeded', 'Succeeded on the old server', 90_000);

    // deleting: the old server accepts deletes again; the sandbox is deleted there, then the Job goes
    a.faults.deleteFails = false;
    await eventually404('the deleted Job', `${X}/namespaces/${ns}/jobs/deleting`, 90_000);
    assert.equal(a.sandboxes.get(deleting.status!.execution!.sandboxID!)?.status.reason, 'user_delete');

    // pending: the landed create is adopted on the old server, its duplicates deleted
    a.faults.crashAfterCreate = 0;
    a.faults.listLag = false;
    const adopted = await sandboxed('pending');
    assert.equal(adopted.status?.execution?.endpoint, a.url);
    assert.ok(tagged(a, pending.metadata.uid).includes(adopted.status.execution.sandboxID!));
    a.finish(adopted.status.execution.sandboxID!, true);
    await until(ns, 'pending', (x) => x.status?.phase === 'Succeeded', 'Succeeded on the old server', 90_000);
    await eventually('duplicates of the pending create are deleted', () =>
      Promise.resolve(
        tagged(a, pending.metadata.uid).every((id) => a.sandboxes.get(id)?.status.state === 'Terminated'),
      ),
    );

    for (const j of [finished, running, deleting, pending])
      assert.deepEqual(tagged(b, j.metadata.uid), [], `${j.metadata.name} never reached the new server`);
    assert.equal(
      b.calls.filter((c) => c.method === 'DELETE').length,
      0,
      'nothing of the old Jobs was deleted (or looked for) on the new server',
    );
    const live = [...a.sandboxes.values()].filter((s) => s.status.state !== 'Terminated').map((s) => s.id);
    assert.deepEqual(live, [], 'no sandbox is orphaned on the old server');
    b.finish(fresh.status.execution.sandboxID!, true);
    await until(ns, 'fresh', (x) => x.status?.phase === 'Succeeded', 'Succeeded');
  });
});
