/**
 * Shared pieces of the function-transport e2e specs (serverless.e2e.ts for the webhook transport,
 * lambda.e2e.ts for the lambda transport): rolling out the system Deployments after a configuration
 * switch, the relay's remote-invocation counters, SubjectAccessReviews, and the Run + WorkflowRun +
 * JobClass Job trio that must complete with every function invoked over the transport under test.
 */
import assert from 'node:assert/strict';
import type { KubeObject } from '../lib/kube/types.ts';
import { admin, eventually, type Obj } from './helpers.ts';
import { cond as jobCond, G, job, readyKubernetesClass, serviceAccount, until } from './jobclass-fixtures.ts';
import { createRun, finished, GROUP } from './runs-helpers.ts';

export const NS = 'kruntimes-system';
export const DEPLOYMENTS = `/apis/apps/v1/namespaces/${NS}/deployments`;
export type Deploy = Obj & {
  metadata: { generation?: number };
  spec: { template: { spec: { containers: { name: string; env?: { name: string; value?: string }[] }[] } } };
  status?: { observedGeneration?: number; replicas?: number; updatedReplicas?: number; availableReplicas?: number };
};
type Pod = Obj & { status?: { podIP?: string; containerStatuses?: { ready: boolean }[] } };

/** Waits until the system Deployment `name` has rolled out its latest generation with `want` Pods available. */
export async function rolledOut(name: string, want: number): Promise<void> {
  await eventually(
    `Deployment ${name} rolled out with ${want} available`,
    async () => {
      const d = await admin().get<Deploy>(`${DEPLOYMENTS}/${name}`);
      const s = d.status ?? {};
      return (
        (s.observedGeneration ?? 0) >= (d.metadata.generation ?? 0) &&
        (s.replicas ?? 0) === want &&
        (s.updatedReplicas ?? 0) === want &&
        (s.availableReplicas ?? 0) === want
      );
    },
    120_000,
    200,
  );
}

export async function readyPod(app: string): Promise<Pod> {
  return eventually(`a ready ${app} Pod`, async () => {
    const pods = await admin().list<Pod>(`/api/v1/namespaces/${NS}/pods`, {
      labelSelector: `app.kubernetes.io/name=${app}`,
    });
    return pods.items.find((x) => x.status?.containerStatuses?.[0]?.ready && !x.metadata.deletionTimestamp);
  });
}

/** Out-of-process invocations per function over `transport`, from the relay's metrics. */
export async function remoteInvocations(transport: 'webhook' | 'lambda'): Promise<Record<string, number>> {
  const pod = await readyPod('kruntimes-extension');
  const text = await (await fetch(`http://${pod.status?.podIP ?? ''}:8080/metrics`)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^kruntimes_function_remote_invocations_total\{([^}]*)\} (\d+)/gm)) {
    const fn = /function="([^"]+)"/.exec(m[1] ?? '')?.[1] ?? '';
    if (m[1]?.includes(`transport="${transport}"`)) out[fn] = (out[fn] ?? 0) + Number(m[2]);
  }
  return out;
}

export interface Access {
  verb: string;
  group?: string;
  resource: string;
  subresource?: string;
  namespace?: string;
  name?: string;
}

/** A SubjectAccessReview for a ServiceAccount user of the system namespace. */
export async function may(user: string, a: Access): Promise<boolean> {
  const r = await admin().create<KubeObject & { status?: { allowed?: boolean } }>(
    '/apis/authorization.k8s.io/v1/subjectaccessreviews',
    {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: {
        user,
        groups: ['system:serviceaccounts', `system:serviceaccounts:${NS}`, 'system:authenticated'],
        resourceAttributes: { group: '', ...a },
      },
    },
  );
  return r.status?.allowed === true;
}
export const sa = (name: string): string => `system:serviceaccount:${NS}:${name}`;
export const impersonate = (name: string): Access => ({
  verb: 'impersonate',
  resource: 'serviceaccounts',
  namespace: NS,
  name,
});

/**
 * What the scheduler and the Kubernetes adapter write (Run and Job status) the relay's identity may
 * not write: the relay applies it as the function's ServiceAccount, which may, and which it may
 * impersonate (and not `default`); the adapter reads no Secret.
 */
export async function assertAppliedAsFunctions(ns: string): Promise<void> {
  const relay = sa('kruntimes-extension');
  const runStatus = { verb: 'update', group: 'kruntimes.io', resource: 'runs', subresource: 'status', namespace: ns };
  assert.equal(await may(relay, runStatus), false, 'relay: update runs/status');
  assert.equal(await may(sa('kruntimes-fn-run-scheduler'), runStatus), true, 'scheduler: update runs/status');
  assert.equal(await may(relay, impersonate('kruntimes-fn-run-scheduler')), true, 'relay: impersonate scheduler');
  assert.equal(await may(relay, impersonate('default')), false, 'relay: impersonate default');
  const jobStatus = { verb: 'update', group: G, resource: 'jobs', subresource: 'status', namespace: ns };
  assert.equal(await may(relay, jobStatus), false, 'relay: update jobs/status');
  assert.equal(await may(sa('kruntimes-fn-jobclass-kubernetes'), jobStatus), true, 'adapter: update jobs/status');
  const secrets = { verb: 'get', resource: 'secrets', namespace: ns, name: 'x' };
  assert.equal(await may(sa('kruntimes-fn-jobclass-kubernetes'), secrets), false, 'adapter: get secrets');
}

async function workflowFinished(ns: string, name: string): Promise<Obj & { status?: Record<string, string> }> {
  return eventually(
    `WorkflowRun ${name} to finish`,
    async () => {
      const w = await admin().get<Obj & { status?: Record<string, string> }>(
        `${GROUP}/namespaces/${ns}/workflowruns/${name}`,
      );
      return ['Succeeded', 'Failed', 'Cancelled'].includes(w.status?.phase ?? '') ? w : undefined;
    },
    90_000,
    100,
  );
}

/**
 * Creates a Run (`<prefix>-run`), a two-job WorkflowRun (`<prefix>-wf`) and a Job of the Kubernetes
 * JobClass `cls` (`<prefix>-job`) in `ns` (which has a ready `bash` Runtime) and asserts that all
 * three succeed and that the Run, Workflow and JobClass functions were invoked over `transport`.
 */
export async function runWorkflowAndJob(
  ns: string,
  prefix: string,
  cls: string,
  transport: 'webhook' | 'lambda',
): Promise<void> {
  const before = await remoteInvocations(transport);
  await createRun(
    ns,
    { runtime: 'bash', source: { inline: 'echo "sum=$((20 + 22))" >> "$KRUNTIME_OUTPUTS"' } },
    { name: `${prefix}-run` },
  );
  await admin().create(`${GROUP}/namespaces/${ns}/workflowruns`, {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'WorkflowRun',
    metadata: { name: `${prefix}-wf` },
    spec: {
      jobs: {
        a: { 'runs-on': 'bash', steps: [{ name: 's', run: 'echo first' }] },
        b: { 'runs-on': 'bash', needs: ['a'], steps: [{ name: 't', run: 'echo second' }] },
      },
    },
  });
  await serviceAccount(ns);
  await readyKubernetesClass(cls);
  await job(ns, `${prefix}-job`, { jobClassName: cls, image: 'bash', command: ['bash', '-c', 'echo hello'] });
  const run = await finished(ns, `${prefix}-run`);
  assert.equal(run.status?.phase, 'Succeeded', run.status?.message);
  assert.deepEqual(run.status?.outputs, { sum: '42' });
  const wf = await workflowFinished(ns, `${prefix}-wf`);
  assert.equal(wf.status?.phase, 'Succeeded', wf.status?.message);
  const done = (x: { status?: { phase?: string } }): boolean => ['Succeeded', 'Failed'].includes(x.status?.phase ?? '');
  const j = await until(ns, `${prefix}-job`, done, 'finished');
  assert.equal(j.status?.phase, 'Succeeded', jobCond(j, 'Succeeded')?.message);
  const seen = await remoteInvocations(transport);
  for (const fn of ['run-scheduler', 'workflowrun-controller', 'jobclass-controller', 'jobclass-kubernetes'])
    assert.ok((seen[fn] ?? 0) > (before[fn] ?? 0), `${fn} invoked over ${transport}: ${JSON.stringify(seen)}`);
}
