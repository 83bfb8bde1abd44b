/**
 * JobClass execution on the real cluster: class resolution (explicit, default, none, several),
 * frozen resolution, resource policy, the Kubernetes adapter through the real job controller and
 * node agent (ServiceAccount from the parameters, never the default one), admission rejections,
 * cancel; and the OpenSandbox adapter against the local spec-validating OpenSandbox server
 * (one tagged sandbox, exactly one sandbox after a crash between create and status write,
 * pool exhaustion reported and retried).
 */
import assert from 'node:assert/strict';
import { isApiError } from '../lib/kube/errors.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { admin, deleteNamespace, eventually, newNamespace, type Obj } from './helpers.ts';
import { startOpenSandboxServer, type OpenSandboxTestServer } from './opensandbox-server/server.ts';

const X = '/apis/execution.ayatori.ddupan.top/v1alpha1';
type Cond = { type: string; status: string; reason: string; message: string };
type Job = Obj & { status?: { phase?: string; message?: string; conditions?: Cond[]; resolvedJobClass?: { name: string; uid: string; controllerName: string; parametersRef?: { uid?: string } }; effectiveResources?: Record<string, Record<string, string>>; execution?: { name?: string; sandboxID?: string } } };
const cond = (j: Job, t: string): Cond | undefined => j.status?.conditions?.find((c) => c.type === t);
const uniq = `${process.pid}`;

async function apply(path: string, obj: Record<string, unknown>): Promise<void> {
  await admin().create(path, obj).catch((e: unknown) => { if (!isApiError(e, 409)) throw e; });
}
async function job(ns: string, name: string, spec: Record<string, unknown>): Promise<void> {
  await admin().create(`${X}/namespaces/${ns}/jobs`, { apiVersion: 'execution.ayatori.ddupan.top/v1alpha1', kind: 'Job', metadata: { name }, spec });
}
const getJob = (ns: string, name: string): Promise<Job> => admin().get<Job>(`${X}/namespaces/${ns}/jobs/${name}`);
async function until(ns: string, name: string, pred: (j: Job) => boolean, what: string, timeoutMs = 60_000): Promise<Job> {
  return eventually(`Job ${name}: ${what}`, async () => { const j = await getJob(ns, name); return pred(j) ? j : undefined; }, timeoutMs);
}
function kubernetesClass(name: string, params: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const meta = (extra.metadata ?? {}) as Record<string, unknown>;
  const spec = (extra.spec ?? {}) as Record<string, unknown>;
  return { apiVersion: 'execution.ayatori.ddupan.top/v1alpha1', kind: 'JobClass', metadata: { name, ...meta },
    spec: { controllerName: 'execution.ayatori.ddupan.top/kubernetes', parametersRef: { group: 'execution.ayatori.ddupan.top', kind: 'KubernetesExecutionParameters', name: params }, ...spec } };
}

describe('JobClass execution: Kubernetes adapter', function () {
  let ns: string;
  const cls = `e2e-k8s-${uniq}`;
  before(async () => {
    ns = await newNamespace('jc');
    await admin().create(`/api/v1/namespaces/${ns}/serviceaccounts`, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'jobs-runner' } });
    await apply(`${X}/kubernetesexecutionparameters`, { apiVersion: 'execution.ayatori.ddupan.top/v1alpha1', kind: 'KubernetesExecutionParameters', metadata: { name: `${cls}-params` }, spec: { serviceAccountName: 'jobs-runner' } });
    await apply(`${X}/jobclasses`, kubernetesClass(cls, `${cls}-params`, { spec: { resources: { defaults: { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '500m', memory: '256Mi' } }, maximum: { limits: { cpu: '2', memory: '1Gi' } } } } }));
    await eventually('the class Ready', async () => (await admin().get<Job>(`${X}/jobclasses/${cls}`)).status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
  });
  after(async () => { await deleteNamespace(ns); });

  it('runs a Job as a batch/v1 Job with the parameters\' ServiceAccount, freezes the class and the effective resources', async () => {
    await job(ns, 'hello', { jobClassName: cls, image: 'bash', command: ['bash', '-c', 'echo hello from JobClass'] });
    const j = await until(ns, 'hello', (x) => x.status?.phase === 'Succeeded', 'Succeeded');
    const c = await admin().get<Obj>(`${X}/jobclasses/${cls}`);
    assert.equal(j.status?.resolvedJobClass?.name, cls);
    assert.equal(j.status?.resolvedJobClass?.uid, c.metadata.uid);
    assert.ok(j.status?.resolvedJobClass?.parametersRef?.uid, 'the parameters object UID is frozen too');
    assert.equal(j.status?.resolvedJobClass?.controllerName, 'execution.ayatori.ddupan.top/kubernetes');
    assert.deepEqual(j.status?.effectiveResources, { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '500m', memory: '256Mi' } });
    const bj = await admin().get<Obj & { spec: { template: { spec: { serviceAccountName: string } } } }>(`/apis/batch/v1/namespaces/${ns}/jobs/${j.status?.execution?.name}`);
    assert.equal(bj.spec.template.spec.serviceAccountName, 'jobs-runner');
    assert.equal(bj.metadata.ownerReferences?.[0]?.kind, 'Job');
  });

  it('does not schedule without the parameters\' ServiceAccount (never the default one)', async () => {
    const other = await newNamespace('jc-nosa');
    try {
      await job(other, 'no-sa', { jobClassName: cls, image: 'bash', command: ['true'] });
      const j = await until(other, 'no-sa', (x) => cond(x, 'Scheduled')?.reason === 'ServiceAccountNotFound', 'ServiceAccountNotFound');
      assert.equal(cond(j, 'Scheduled')?.status, 'False');
      assert.match(cond(j, 'Scheduled')?.message ?? '', /the default ServiceAccount is never used/);
    } finally { await deleteNamespace(other); }
  });

  it('rejects at admission an unknown class and resources above the class maximum', async () => {
    await assert.rejects(job(ns, 'unknown-class', { jobClassName: 'no-such-class', image: 'bash', command: ['true'] }), (e: unknown) => isApiError(e) && /no-such-class/.test(e.message));
    await assert.rejects(job(ns, 'too-big', { jobClassName: cls, image: 'bash', command: ['true'], resources: { limits: { cpu: '8' } } }), (e: unknown) => isApiError(e) && /cpu/.test(e.message));
  });

  it('cancels a running Job', async () => {
    await job(ns, 'long', { jobClassName: cls, image: 'bash', command: ['bash', '-c', 'sleep 60'] });
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
    srv = await startOpenSandboxServer({ apiKeys: ['key-1'], insecure: true, pools: { small: 1 } });
    await admin().create(`/api/v1/namespaces/${ns}/secrets`, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'opensandbox-api' }, stringData: { 'api-key': 'key-1' } });
    for (const [name, pool] of [[cls, undefined], [`${cls}-pool`, 'small']] as const) {
      await apply(`${X}/opensandboxexecutionparameters`, { apiVersion: 'execution.ayatori.ddupan.top/v1alpha1', kind: 'OpenSandboxExecutionParameters', metadata: { name: `${name}-params` },
        spec: { endpoint: srv.url, apiKeySecretRef: { namespace: ns, name: 'opensandbox-api', key: 'api-key' }, ...(pool ? { poolRef: pool } : {}) } });
      await apply(`${X}/jobclasses`, { apiVersion: 'execution.ayatori.ddupan.top/v1alpha1', kind: 'JobClass', metadata: { name },
        spec: { controllerName: 'execution.ayatori.ddupan.top/opensandbox', parametersRef: { group: 'execution.ayatori.ddupan.top', kind: 'OpenSandboxExecutionParameters', name: `${name}-params` },
          resources: { defaults: { requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '1', memory: '1Gi' } } } } });
      await eventually(`class ${name} Ready`, async () => (await admin().get<Job>(`${X}/jobclasses/${name}`)).status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'), 90_000);
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
    const before = srv.sandboxes.size;
    await job(ns, 'crash', { jobClassName: cls, image: 'python:3.12', command: ['true'] });
    await until(ns, 'crash', (x) => !!x.status?.execution?.sandboxID, 'a sandbox');
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(srv.sandboxes.size, before + 1);
  });

  it('reports pool exhaustion (HTTP 429) as a clear, retried condition', async () => {
    await job(ns, 'first', { jobClassName: `${cls}-pool`, image: 'python:3.12', command: ['true'] });
    const first = await until(ns, 'first', (x) => !!x.status?.execution?.sandboxID, 'a sandbox');
    await job(ns, 'second', { jobClassName: `${cls}-pool`, image: 'python:3.12', command: ['true'] });
    const waiting = await until(ns, 'second', (x) => cond(x, 'Scheduled')?.reason === 'PoolExhausted', 'PoolExhausted');
    assert.match(waiting.status?.message ?? cond(waiting, 'Scheduled')?.message ?? '', /pool small/);
    srv.finish(first.status!.execution!.sandboxID!, true);
    await until(ns, 'second', (x) => !!x.status?.execution?.sandboxID, 'a sandbox once capacity frees', 90_000);
  });
});

export type { KubeObject };
