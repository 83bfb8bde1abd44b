/**
 * Seed 001's JobClass YAML examples (examples/jobclass/, copied verbatim) applied as written on
 * the real cluster, with the prerequisites the seed's text names:
 * - `rootless` (Kubernetes, global default): a Job without a class in a namespace labelled
 *   ayatori.ddupan.top/execution=enabled runs under the parameters' ServiceAccount, RuntimeClass,
 *   node selector, tolerations and Pod security context. The RuntimeClass overhead is accounted
 *   as the seed says (Runtime/VM overhead 不计入用户请求的 task resources; the Kubernetes adapter
 *   uses RuntimeClass Pod overhead): the API server sets Pod.spec.overhead from the RuntimeClass,
 *   the container keeps exactly the effective resources, and a Job at the class maximum is
 *   admitted although maximum + overhead exceeds it.
 * - users who hold only Ayatori Job rights create and cancel Jobs but cannot change, delete or
 *   exec into the generated batch Job and Pod (seed: 普通调用者只拥有 Ayatori Job 权限).
 * - `microvm` (OpenSandbox) is Accepted as written; without its API key Secret, and then with the
 *   example's unreachable host, it is not Ready, and a Job in a microvm-access namespace is
 *   Accepted and waits unscheduled (Scheduled=False).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { isApiError } from '../lib/kube/errors.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import { admin, deleteNamespace, eventually, newNamespace, serviceAccountClient, type Obj } from './helpers.ts';
import { X, classReady, classUntil, cleanup, cond, executionsOf, getClass, job, until } from './jobclass-fixtures.ts';

const RC = '/apis/node.k8s.io/v1/runtimeclasses';
const NODE_ROLE = 'ayatori.ddupan.top/node-role';
const OVERHEAD = { cpu: '100m', memory: '64Mi' };

function example(file: string): Obj[] {
  const text = readFileSync(join(REPO_ROOT, 'examples', 'jobclass', file), 'utf8');
  return parseAllDocuments(text).map((d) => d.toJSON() as Obj);
}

async function applyAsWritten(objs: Obj[]): Promise<void> {
  for (const o of objs) {
    const plural = o.kind === 'JobClass' ? 'jobclasses' : `${(o.kind ?? '').toLowerCase()}`;
    await admin().create(`${X}/${plural}`, o);
  }
}

type Pod = Obj & {
  spec: {
    runtimeClassName?: string;
    serviceAccountName?: string;
    overhead?: Record<string, string>;
    nodeSelector?: Record<string, string>;
    tolerations?: { key?: string; value?: string; effect?: string }[];
    securityContext?: Record<string, unknown>;
    containers: { resources?: Record<string, Record<string, string>> }[];
  };
};

describe('JobClass: the seed examples applied as written', function () {
  const owned: string[] = [];
  const namespaces: string[] = [];
  let node = '';
  after(async () => {
    for (const n of namespaces) await deleteNamespace(n);
    await cleanup(owned);
    if (node) await admin().patch(`/api/v1/nodes/${node}`, { metadata: { labels: { [NODE_ROLE]: null } } });
  });

  it('rootless: runs a classless Job as the seed configures it; RuntimeClass overhead stays out of the task resources; users cannot edit the generated batch Job and Pod', async () => {
    owned.push(`${X}/jobclasses/rootless`, `${X}/kubernetesexecutionparameters/rootless`, `${RC}/runc`);
    await admin().create(RC, {
      apiVersion: 'node.k8s.io/v1',
      kind: 'RuntimeClass',
      metadata: { name: 'runc' },
      handler: 'runc',
      overhead: { podFixed: OVERHEAD },
    });
    node = (await admin().list<Obj>('/api/v1/nodes')).items[0]?.metadata.name ?? '';
    await admin().patch(`/api/v1/nodes/${node}`, { metadata: { labels: { [NODE_ROLE]: 'execution' } } });
    await applyAsWritten(example('rootless.yaml'));
    await classReady('rootless');
    assert.equal(cond(await getClass('rootless'), 'Accepted')?.status, 'True');

    const ns = await newNamespace('jcex');
    namespaces.push(ns);
    await admin().patch(`/api/v1/namespaces/${ns}`, {
      metadata: { labels: { 'ayatori.ddupan.top/execution': 'enabled' } },
    });
    for (const sa of ['ayatori-job', 'alice'])
      await admin().create(`/api/v1/namespaces/${ns}/serviceaccounts`, {
        apiVersion: 'v1',
        kind: 'ServiceAccount',
        metadata: { name: sa },
      });
    // alice holds Ayatori Job rights only (what the Ayatori user roles grant), nothing on batch or core.
    await admin().create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'ayatori-jobs' },
      rules: [{ apiGroups: ['execution.ayatori.ddupan.top'], resources: ['jobs'], verbs: ['*'] }],
    });
    await admin().create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'alice-ayatori-jobs' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'ayatori-jobs' },
      subjects: [{ kind: 'ServiceAccount', name: 'alice', namespace: ns }],
    });
    const alice = await serviceAccountClient(ns, 'alice');

    // A classless Job resolves to the global default; a Job at the class maximum is admitted:
    // the overhead is not added to the task resources.
    await eventually('alice may create Jobs', async () =>
      alice
        .create(`${X}/namespaces/${ns}/jobs`, {
          apiVersion: 'execution.ayatori.ddupan.top/v1alpha1',
          kind: 'Job',
          metadata: { name: 'hello' },
          spec: {
            image: 'bash',
            command: ['bash', '-c', 'sleep 300'],
            resources: { limits: { cpu: '8', memory: '16Gi' } },
          },
        })
        .then(() => true),
    );
    const j = await until(ns, 'hello', (x) => x.status?.phase === 'Running', 'Running', 90_000);
    assert.equal(j.status?.resolvedJobClass?.name, 'rootless');
    const eff = { requests: { cpu: '250m', memory: '256Mi' }, limits: { cpu: '8', memory: '16Gi' } };
    assert.deepEqual(j.status?.effectiveResources, eff);
    const { batchJobs, pods } = await executionsOf(ns, j.metadata.uid);
    const pod = pods[0] as Pod;
    assert.deepEqual(
      [pod.spec.serviceAccountName, pod.spec.runtimeClassName, pod.spec.nodeSelector, pod.spec.securityContext],
      [
        'ayatori-job',
        'runc',
        { [NODE_ROLE]: 'execution' },
        { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
      ],
    );
    assert.ok(pod.spec.tolerations?.some((t) => t.key === 'ayatori.ddupan.top/execution' && t.effect === 'NoSchedule'));
    assert.deepEqual(pod.spec.overhead, OVERHEAD, 'the Pod carries the RuntimeClass overhead');
    assert.deepEqual(pod.spec.containers[0]?.resources, eff, 'the task resources are exactly the effective ones');
    assert.deepEqual(batchJobs[0]?.spec.template.spec.containers[0]?.resources, eff);
    assert.ok(
      !JSON.stringify(batchJobs[0]?.spec.template.spec).includes('overhead'),
      'the adapter does not add overhead itself (the RuntimeClass admission does, on the Pod)',
    );

    // alice cannot touch the generated batch Job or Pod, only the Ayatori Job.
    const bj = `/apis/batch/v1/namespaces/${ns}/jobs/${batchJobs[0]?.metadata.name ?? ''}`;
    const po = `/api/v1/namespaces/${ns}/pods/${pod.metadata.name ?? ''}`;
    const denied = (e: unknown): boolean => isApiError(e, 403);
    await assert.rejects(alice.patch(bj, { spec: { suspend: true } }), denied);
    await assert.rejects(alice.delete(bj), denied);
    await assert.rejects(alice.patch(po, { metadata: { labels: { x: 'y' } } }), denied);
    await assert.rejects(alice.delete(po), denied);
    await assert.rejects(alice.get(`${po}/log`), denied);
    await assert.rejects(
      alice.create(`/apis/batch/v1/namespaces/${ns}/jobs`, { ...batchJobs[0], metadata: { name: 'copy' } }),
      denied,
    );
    await alice.patch(`${X}/namespaces/${ns}/jobs/hello`, { spec: { cancelRequested: true } });
    const cancelled = await until(ns, 'hello', (x) => x.status?.phase === 'Failed', 'Cancelled', 90_000);
    assert.equal(cond(cancelled, 'Failed')?.reason, 'Cancelled');
  });

  it('microvm: Accepted as written; not Ready without its API key Secret or a reachable backend; Jobs wait, accepted', async () => {
    owned.push(`${X}/jobclasses/microvm`, `${X}/opensandboxexecutionparameters/microvm`);
    await applyAsWritten(example('microvm.yaml'));
    const cls = await classUntil('microvm', 'Ready', 'ApiKeySecretNotFound', 'False');
    assert.equal(cond(cls, 'Accepted')?.status, 'True', 'the example is a valid class');
    await admin()
      .create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'ayatori-system' } })
      .catch((e: unknown) => {
        if (!isApiError(e, 409)) throw e;
      });
    await admin().create('/api/v1/namespaces/ayatori-system/secrets', {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'opensandbox-api' },
      stringData: { 'api-key': 'example-key' },
    });
    owned.push('/api/v1/namespaces/ayatori-system/secrets/opensandbox-api');
    await classUntil('microvm', 'Ready', 'BackendUnreachable', 'False');

    const ns = await newNamespace('jcexvm');
    namespaces.push(ns);
    await admin().patch(`/api/v1/namespaces/${ns}`, {
      metadata: { labels: { 'ayatori.ddupan.top/microvm-access': 'true' } },
    });
    await job(ns, 'vm', { jobClassName: 'microvm', image: 'python:3.12', command: ['python3', '-c', 'print(1)'] });
    const waiting = await until(ns, 'vm', (x) => cond(x, 'Scheduled')?.status === 'False', 'Scheduled=False', 90_000);
    assert.equal(cond(waiting, 'Accepted')?.status, 'True');
    // The adapter lists the Job's sandboxes first (the example host does not resolve), or finds the class not Ready.
    assert.ok(
      ['BackendUnreachable', 'JobClassNotReady'].includes(cond(waiting, 'Scheduled')?.reason ?? ''),
      JSON.stringify(cond(waiting, 'Scheduled')),
    );
    assert.equal(waiting.status?.execution?.sandboxID, undefined);
    assert.deepEqual(waiting.status?.effectiveResources, {
      requests: { cpu: '1', memory: '1Gi' },
      limits: { cpu: '2', memory: '2Gi' },
    });
  });
});
