/**
 * The `lambda` transport on the real local cluster (issue 13): the relay invokes every watch
 * function as an AWS Lambda Invoke of the real Runtime Interface Emulator (scripts/build-lambda-rie.sh)
 * in front of aws-lambda-ric running cmd/lambda.handler, the entrypoint of the Lambda image (lambda/Dockerfile),
 * as host processes. A Run, a WorkflowRun and a JobClass Job (the Kubernetes adapter) complete
 * with their functions invoked that way, and the operations are applied as each function's own
 * ServiceAccount: the SubjectAccessReviews show the relay's identity may not write what the
 * functions wrote, while the function's identity may and the relay may impersonate exactly it.
 *
 * The transport is switched by configuration only (the extension Deployment's env) and back after.
 */
import assert from 'node:assert/strict';
import type { KubeObject } from '../lib/kube/types.ts';
import { PatchType } from '../lib/kube/client.ts';
import { admin, deleteNamespace, eventually, newNamespace, type Obj } from './helpers.ts';
import {
  cleanup,
  cond as jobCond,
  G,
  job,
  readyKubernetesClass,
  serviceAccount,
  uniq,
  until,
  X,
} from './jobclass-fixtures.ts';
import { startLambdaRie, type LambdaRie } from './lambda-rie.ts';
import { createRun, example, finished, GROUP, runtimePods } from './runs-helpers.ts';

const NS = 'kruntimes-system';
const EXTENSION = `/apis/apps/v1/namespaces/${NS}/deployments/kruntimes-extension`;
const KEYS = ['KRT_FUNCTION_TRANSPORT', 'KRT_LAMBDA_ENDPOINT', 'KRT_LAMBDA_FUNCTION_NAME'];
type EnvVar = { name: string; value?: string };
type Deploy = Obj & {
  metadata: { generation?: number };
  spec: { template: { spec: { containers: { name: string; env?: EnvVar[] }[] } } };
  status?: { observedGeneration?: number; replicas?: number; updatedReplicas?: number; availableReplicas?: number };
};
type Pod = Obj & { status?: { podIP?: string; containerStatuses?: { ready: boolean }[] } };

/** The extension Deployment with these env vars set (a value) or removed (undefined), rolled out. */
async function setRelayEnv(vars: Record<string, string | undefined>): Promise<void> {
  const env = Object.entries(vars).map(([name, value]) =>
    value === undefined ? { name, $patch: 'delete' } : { name, value },
  );
  await admin().patch(
    EXTENSION,
    { spec: { template: { spec: { containers: [{ name: 'server', env }] } } } },
    PatchType.strategic,
  );
  await eventually(
    'the extension Deployment rolled out',
    async () => {
      const d = await admin().get<Deploy>(EXTENSION);
      const s = d.status ?? {};
      return (
        (s.observedGeneration ?? 0) >= (d.metadata.generation ?? 0) &&
        s.replicas === 1 &&
        s.updatedReplicas === 1 &&
        s.availableReplicas === 1
      );
    },
    120_000,
    200,
  );
}

/** Out-of-process invocations per function over the lambda transport, from the relay's metrics. */
async function lambdaInvocations(): Promise<Record<string, number>> {
  const pod = await eventually('a ready extension Pod', async () => {
    const pods = await admin().list<Pod>(`/api/v1/namespaces/${NS}/pods`, {
      labelSelector: 'app.kubernetes.io/name=kruntimes-extension',
    });
    return pods.items.find((x) => x.status?.containerStatuses?.[0]?.ready && !x.metadata.deletionTimestamp);
  });
  const text = await (await fetch(`http://${pod.status?.podIP ?? ''}:8080/metrics`)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^kruntimes_function_remote_invocations_total\{([^}]*)\} (\d+)/gm)) {
    const fn = /function="([^"]+)"/.exec(m[1] ?? '')?.[1] ?? '';
    if (/transport="lambda"/.test(m[1] ?? '')) out[fn] = (out[fn] ?? 0) + Number(m[2]);
  }
  return out;
}

async function may(user: string, attrs: Record<string, string>): Promise<boolean> {
  const r = await admin().create<KubeObject & { status?: { allowed?: boolean } }>(
    '/apis/authorization.k8s.io/v1/subjectaccessreviews',
    {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: {
        user,
        groups: ['system:serviceaccounts', `system:serviceaccounts:${NS}`, 'system:authenticated'],
        resourceAttributes: { group: '', ...attrs },
      },
    },
  );
  return r.status?.allowed === true;
}
const sa = (name: string): string => `system:serviceaccount:${NS}:${name}`;

describe('serverless functions: the lambda transport (Runtime Interface Emulator + aws-lambda-ric)', function () {
  let ns: string;
  let rie: LambdaRie | undefined;
  let saved: Record<string, string | undefined> = {};
  const cls = `e2e-lambda-${uniq}`;

  before(async () => {
    // Two execution environments: the Run's, the WorkflowRun's and the Job's functions share them.
    // The functions' settings (e.g. the fixture function directory) go where the handlers run.
    const current = (await admin().get<Deploy>(EXTENSION)).spec.template.spec.containers[0]?.env ?? [];
    const settings = current.filter(
      (e) => e.name.startsWith('KRT_') && e.value !== undefined && !KEYS.includes(e.name),
    ) as { name: string; value: string }[];
    rie = await startLambdaRie(2, Object.fromEntries(settings.map((e) => [e.name, e.value])));
    saved = Object.fromEntries(KEYS.map((k) => [k, current.find((e) => e.name === k)?.value]));
    await setRelayEnv({ KRT_FUNCTION_TRANSPORT: 'lambda', ...rie.env });
    ns = await newNamespace('lambda');
    await admin().create(`${GROUP}/namespaces/${ns}/runtimes`, example('examples/runtimes/bash.yaml'));
    await runtimePods(ns, 'bash', 1);
  });
  after(async () => {
    if (ns) await deleteNamespace(ns);
    await cleanup([`${X}/jobclasses/${cls}`, `${X}/kubernetesexecutionparameters/${cls}-params`]);
    if (Object.keys(saved).length) await setRelayEnv(saved);
    rie?.stop();
  });

  it('a Run, a WorkflowRun and a JobClass Job complete with their functions invoked as Lambda invocations, applied as each function', async () => {
    const before = await lambdaInvocations();
    await createRun(
      ns,
      { runtime: 'bash', source: { inline: 'echo "sum=$((20 + 22))" >> "$KRUNTIME_OUTPUTS"' } },
      { name: 'l-run' },
    );
    await admin().create(`${GROUP}/namespaces/${ns}/workflowruns`, {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'WorkflowRun',
      metadata: { name: 'l-wf' },
      spec: {
        jobs: {
          a: { 'runs-on': 'bash', steps: [{ name: 's', run: 'echo first' }] },
          b: { 'runs-on': 'bash', needs: ['a'], steps: [{ name: 't', run: 'echo second' }] },
        },
      },
    });
    await serviceAccount(ns);
    await readyKubernetesClass(cls);
    await job(ns, 'l-job', { jobClassName: cls, image: 'bash', command: ['bash', '-c', 'echo hello'] });

    const run = await finished(ns, 'l-run');
    assert.equal(run.status?.phase, 'Succeeded', run.status?.message);
    assert.deepEqual(run.status?.outputs, { sum: '42' });
    const wf = await eventually(
      'WorkflowRun l-wf to finish',
      async () => {
        const w = await admin().get<Obj & { status?: { phase?: string; message?: string } }>(
          `${GROUP}/namespaces/${ns}/workflowruns/l-wf`,
        );
        return ['Succeeded', 'Failed', 'Cancelled'].includes(w.status?.phase ?? '') ? w : undefined;
      },
      90_000,
      100,
    );
    assert.equal(wf.status?.phase, 'Succeeded', wf.status?.message);
    const j = await until(ns, 'l-job', (x) => ['Succeeded', 'Failed'].includes(x.status?.phase ?? ''), 'finished');
    assert.equal(j.status?.phase, 'Succeeded', jobCond(j, 'Succeeded')?.message);

    const seen = await lambdaInvocations();
    for (const fn of ['run-scheduler', 'workflowrun-controller', 'jobclass-controller', 'jobclass-kubernetes'])
      assert.ok(
        (seen[fn] ?? 0) > (before[fn] ?? 0),
        `${fn} was invoked over the lambda transport: ${JSON.stringify(seen)}`,
      );

    // What the scheduler wrote (the Run's status) the relay's identity may not write: the relay
    // applied it as the scheduler's ServiceAccount, which may, and which alone it may impersonate.
    const runStatus = { verb: 'update', group: 'kruntimes.io', resource: 'runs', subresource: 'status', namespace: ns };
    const imp = (name: string): Record<string, string> => ({
      verb: 'impersonate',
      resource: 'serviceaccounts',
      namespace: NS,
      name,
    });
    assert.equal(await may(sa('kruntimes-extension'), runStatus), false, 'relay: update runs/status');
    assert.equal(await may(sa('kruntimes-fn-run-scheduler'), runStatus), true, 'scheduler: update runs/status');
    assert.equal(await may(sa('kruntimes-extension'), imp('kruntimes-fn-run-scheduler')), true);
    assert.equal(await may(sa('kruntimes-extension'), imp('default')), false);
    const jobStatus = { verb: 'update', group: G, resource: 'jobs', subresource: 'status', namespace: ns };
    assert.equal(await may(sa('kruntimes-extension'), jobStatus), false, 'relay: update jobs/status');
    assert.equal(await may(sa('kruntimes-fn-jobclass-kubernetes'), jobStatus), true, 'adapter: update jobs/status');
    const secrets = { verb: 'get', resource: 'secrets', namespace: ns, name: 'x' };
    assert.equal(await may(sa('kruntimes-fn-jobclass-kubernetes'), secrets), false, 'adapter: get secrets');
  });
});
