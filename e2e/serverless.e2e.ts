/**
 * Functions that really are serverless (issue 13): the relay invokes every watch function over the
 * webhook transport (FunctionInvocation v1alpha1 to the local function server Deployment) and
 * applies the answered operations as each function's own ServiceAccount. Proves, on the real
 * cluster: RBAC both ways with SubjectAccessReviews (the relay's identity reads no Secret and
 * writes no Run; a function's ServiceAccount may do what it declares and nothing else), a Run, a
 * Workflow and a JobClass Job completing on the webhook transport, and a function Pod deleted in
 * the middle of a burst of Runs losing and duplicating nothing.
 *
 * The spec switches the running cluster to the webhook transport by configuration (the extension
 * Deployment's KRT_FUNCTION_TRANSPORT env and the function server's replicas) and back after;
 * with KRT_FUNCTION_TRANSPORT=webhook the whole suite already runs that way and nothing switches.
 */
import assert from 'node:assert/strict';
import { PatchType } from '../lib/kube/client.ts';
import { admissionFunctions, loadFunctions, watchFunctions } from '../apiserver/functions.ts';
import { admin, deleteNamespace, eventually, newNamespace } from './helpers.ts';
import { cleanup, uniq, X } from './jobclass-fixtures.ts';
import { createRun, example, finished, getRun, GROUP, runtimePods, type RunObj } from './runs-helpers.ts';
import {
  assertAppliedAsFunctions,
  DEPLOYMENTS,
  impersonate,
  may,
  NS,
  readyPod,
  rolledOut,
  runWorkflowAndJob,
  sa,
  type Access,
} from './transport-helpers.ts';

/** The transport switch: configuration of the two Deployments, never code. */
async function useTransport(t: 'webhook' | 'inprocess'): Promise<void> {
  const env =
    t === 'webhook'
      ? { name: 'KRT_FUNCTION_TRANSPORT', value: t }
      : { name: 'KRT_FUNCTION_TRANSPORT', $patch: 'delete' };
  await admin().patch(
    `${DEPLOYMENTS}/kruntimes-functions`,
    { spec: { replicas: t === 'webhook' ? 1 : 0 } },
    PatchType.merge,
  );
  await admin().patch(
    `${DEPLOYMENTS}/kruntimes-extension`,
    { spec: { template: { spec: { containers: [{ name: 'server', env: [env] }] } } } },
    PatchType.strategic,
  );
  await rolledOut('kruntimes-functions', t === 'webhook' ? 1 : 0);
  await rolledOut('kruntimes-extension', 1);
}

describe('serverless functions: webhook transport and one identity per function', function () {
  let ns: string;
  const cls = `e2e-sls-${uniq}`;
  const switched = process.env.KRT_FUNCTION_TRANSPORT !== 'webhook';
  before(async () => {
    if (switched) await useTransport('webhook');
    ns = await newNamespace('sls');
    await admin().create(`${GROUP}/namespaces/${ns}/runtimes`, example('examples/runtimes/bash.yaml'));
    await runtimePods(ns, 'bash', 2);
  });
  after(async () => {
    if (ns) await deleteNamespace(ns);
    await cleanup([`${X}/jobclasses/${cls}`, `${X}/kubernetesexecutionparameters/${cls}-params`]);
    if (switched) await useTransport('inprocess');
  });

  it('RBAC both ways: the relay reads no Secret, writes no Run and reviews no access itself; each function may what it declares only', async () => {
    await assertAppliedAsFunctions(ns);
    const relay = sa('kruntimes-extension');
    const secrets = { verb: 'get', resource: 'secrets', namespace: ns, name: 'x' };
    const runStatus = { verb: 'update', group: 'kruntimes.io', resource: 'runs', subresource: 'status', namespace: ns };
    assert.equal(await may(relay, secrets), false, 'relay: get secrets');
    assert.equal(await may(relay, { verb: 'create', group: 'kruntimes.io', resource: 'runs', namespace: ns }), false);
    assert.equal(await may(relay, { verb: 'list', group: 'kruntimes.io', resource: 'runs' }), true, 'relay: list runs');
    assert.equal(
      await may(relay, impersonate('kruntimes-fn-tls-certificates')),
      false,
      'a cron function is not impersonated',
    );
    assert.equal(await may(relay, { verb: 'impersonate', resource: 'users', name: 'admin' }), false);
    // Admission functions too: the server reviews access only as the function that declares it.
    const review = { verb: 'create', group: 'authorization.k8s.io', resource: 'subjectaccessreviews' };
    assert.equal(await may(relay, review), false, 'relay: create subjectaccessreviews');
    assert.equal(await may(relay, impersonate('kruntimes-fn-jobclass-admission')), true);
    assert.equal(await may(sa('kruntimes-fn-jobclass-admission'), review), true, 'jobclass-admission: review');
    assert.equal(await may(sa('kruntimes-fn-run-scheduler'), secrets), false, 'scheduler: get secrets');
    const opensandbox = sa('kruntimes-fn-jobclass-opensandbox');
    assert.equal(await may(opensandbox, secrets), true, 'opensandbox adapter: get secrets by name');
    assert.equal(await may(opensandbox, { ...secrets, verb: 'list', name: undefined }), false);
    assert.equal(await may(opensandbox, runStatus), false);
    const fns = await loadFunctions();
    for (const fn of [...watchFunctions(fns), ...admissionFunctions(fns)]) {
      for (const r of fn.rbac) {
        const a: Access = {
          verb: r.verbs[0]!,
          group: r.apiGroups[0]!,
          resource: r.resources[0]!.split('/')[0]!,
          ...(r.resources[0]!.includes('/') ? { subresource: r.resources[0]!.split('/')[1] } : {}),
          namespace: r.scope === 'namespace' ? NS : ns,
          ...(r.resourceNames ? { name: r.resourceNames[0] } : {}),
        };
        assert.equal(await may(sa(`kruntimes-fn-${fn.name}`), a), true, `${fn.name}: ${JSON.stringify(a)}`);
      }
      assert.equal(
        await may(sa(`kruntimes-fn-${fn.name}`), { verb: 'delete', resource: 'namespaces', name: ns }),
        false,
      );
    }
  });

  it('a Run, a Workflow and a JobClass Job complete with their functions invoked over the webhook transport', async () => {
    await runWorkflowAndJob(ns, 'hook', cls, 'webhook');
  });

  it('a function Pod deleted in the middle of a burst of Runs loses and duplicates nothing', async () => {
    const n = 24;
    const names = Array.from({ length: n }, (_, i) => `burst-${i}`);
    const before = await readyPod('kruntimes-functions');
    await Promise.all(
      names.map((name) =>
        createRun(ns, { runtime: 'bash', source: { inline: `echo "me=${name}" >> "$KRUNTIME_OUTPUTS"` } }, { name }),
      ),
    );
    await eventually(
      'the burst under way',
      async () => {
        const runs = await Promise.all(names.map((x) => getRun(ns, x)));
        return runs.some((r) => r.status?.assignedPod) && runs.some((r) => !r.status?.completionTime);
      },
      60_000,
      20,
    );
    await admin().delete(`/api/v1/namespaces/${NS}/pods/${before.metadata.name}`);
    const done: RunObj[] = [];
    for (const name of names) done.push(await finished(ns, name, 120_000));
    for (const r of done) {
      assert.equal(r.status?.phase, 'Succeeded', `${r.metadata.name}: ${r.status?.message}`);
      assert.equal(r.status?.attempt, 1, `${r.metadata.name} ran once`);
      assert.deepEqual(r.status?.outputs, { me: r.metadata.name });
    }
    const runs = await admin().list<RunObj>(`${GROUP}/namespaces/${ns}/runs`);
    assert.equal(runs.items.filter((r) => r.metadata.name?.startsWith('burst-')).length, n, 'no Run lost or added');
    const after = await readyPod('kruntimes-functions');
    assert.notEqual(after.metadata.uid, before.metadata.uid, 'a new function Pod serves the rest');
  });
});
