/**
 * PersistentWorkspaces on the real cluster: binding and UID fencing, Runs sharing a workspace,
 * the `use` permission boundary (SubjectAccessReview, Role resourceNames, fail closed, forged
 * controller path), cleanup by deletion and by TTL, Retain, Lost after bound-Pod loss, and
 * Runtime workspace volume sources (emptyDir sizeLimit, PVC).
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { KubeClient } from '../lib/kube/client.ts';
import { isApiError } from '../lib/kube/errors.ts';
import { E2E_ROOT, cluster } from './cluster.ts';
import {
  admin,
  deleteNamespace,
  eventually,
  newNamespace,
  pkiFile,
  runCronJobNow,
  serviceAccountClient,
  type Obj,
} from './helpers.ts';
import { GROUP, bashRuntime, createRun, createRuntime, finished, getRun, runtimePods } from './runs-helpers.ts';
import { bound, createWs, getWs, gone, wsPath } from './workspace-helpers.ts';

function hostDir(pod: string, ws: string, nodeOf: Map<string, { node: string; uid: string }>): string {
  const p = nodeOf.get(pod)!;
  return join(E2E_ROOT, 'nodes', p.node, 'pods', p.uid, 'volumes', 'workspace', 'persistent', ws);
}

describe('PersistentWorkspaces', function () {
  let ns: string;
  const pods = new Map<string, { node: string; uid: string }>();
  before(async () => {
    ns = await newNamespace('ws');
    await createRuntime(
      ns,
      'bash',
      bashRuntime({
        replicas: 2,
        workspace: { emptyDir: { sizeLimit: '1Gi' } },
        capacity: { resources: { runs: '4' } },
      }),
    );
    for (const p of await runtimePods(ns, 'bash', 2))
      pods.set(p.metadata.name ?? '', { node: p.spec.nodeName ?? '', uid: p.metadata.uid ?? '' });
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it('binds to a ready Runtime Pod with UID fencing and lets Runs share files in it', async () => {
    await createWs(ns, 'shared', { runtime: 'bash' });
    const w = await bound(ns, 'shared');
    assert.ok(pods.has(w.status?.boundPod ?? ''));
    assert.equal(w.status?.boundPodUID, pods.get(w.status?.boundPod ?? '')?.uid);
    assert.equal(w.status?.path, '/workspace/persistent/shared');
    assert.ok(w.status?.lastUsedTime, 'a new Bound workspace starts its unused interval');
    await createRun(
      ns,
      {
        runtime: 'bash',
        workspace: { name: 'shared' },
        source: { inline: 'mkdir -p src && echo built > src/out.txt && pwd > where.txt' },
      },
      { name: 'writer' },
    );
    const wr = await finished(ns, 'writer');
    assert.equal(wr.status?.phase, 'Succeeded', wr.status?.message);
    assert.equal(wr.status?.assignedPod, w.status?.boundPod);
    await createRun(
      ns,
      {
        runtime: 'bash',
        workspace: { name: 'shared' },
        source: {
          inline:
            'echo "seen=$(cat src/out.txt)" >> "$KRUNTIME_OUTPUTS"; echo "cwd=$(cat where.txt)" >> "$KRUNTIME_OUTPUTS"',
        },
      },
      { name: 'reader' },
    );
    const rd = await finished(ns, 'reader');
    assert.deepEqual(rd.status?.outputs, { seen: 'built', cwd: '/workspace/persistent/shared' });
    assert.ok(existsSync(join(hostDir(w.status.boundPod!, 'shared', pods), 'src', 'out.txt')));
  });

  it('rejects Runs naming a missing workspace or one of another Runtime', async () => {
    await assert.rejects(
      createRun(ns, { runtime: 'bash', workspace: { name: 'nope' }, source: { inline: 'true' } }),
      (e: unknown) => isApiError(e) && /PersistentWorkspace "nope" does not exist/.test(e.message),
    );
    await createWs(ns, 'py-ws', { runtime: 'python' });
    await assert.rejects(
      createRun(ns, { runtime: 'bash', workspace: { name: 'py-ws' }, source: { inline: 'true' } }),
      (e: unknown) => isApiError(e) && /belongs to runtime "python"/.test(e.message),
    );
  });

  it('requires use on persistentworkspaces/use; a Role with resourceNames grants it for that workspace only', async () => {
    await createWs(ns, 'guarded', { runtime: 'bash' });
    await admin().create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'runner' },
      rules: [{ apiGroups: ['kruntimes.io'], resources: ['runs'], verbs: ['create', 'get', 'list'] }],
    });
    await admin().create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'runner' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'runner' },
      subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: ns }],
    });
    const user = await serviceAccountClient(ns, 'default');
    const run = (name: string, ws: string): Promise<unknown> =>
      user.create(`${GROUP}/namespaces/${ns}/runs`, {
        apiVersion: 'kruntimes.io/v1alpha1',
        kind: 'Run',
        metadata: { name },
        spec: { runtime: 'bash', workspace: { name: ws }, source: { inline: 'true' } },
      });
    await eventually('the runner Role', () => user.list(`${GROUP}/namespaces/${ns}/runs`).then(() => true));
    await assert.rejects(
      run('no-use', 'guarded'),
      (e: unknown) =>
        isApiError(e, 403) &&
        /may not use PersistentWorkspace "guarded".*missing permission verb "use" on resource "persistentworkspaces\/use"/.test(
          e.message,
        ),
    );
    await admin().create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'use-guarded' },
      rules: [
        {
          apiGroups: ['kruntimes.io'],
          resources: ['persistentworkspaces/use'],
          resourceNames: ['guarded'],
          verbs: ['use'],
        },
      ],
    });
    await admin().create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'use-guarded' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'use-guarded' },
      subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: ns }],
    });
    await eventually('the use grant to take effect', async () => {
      try {
        await run('with-use', 'guarded');
        return true;
      } catch {
        return false;
      }
    });
    await assert.rejects(
      run('other-ws', 'shared'),
      (e: unknown) => isApiError(e, 403) && /may not use PersistentWorkspace "shared"/.test(e.message),
    );
    user.close();
  });

  it('rejects a forged Workflow-controller reference', async () => {
    const tok = await admin().create<Obj & { status: { token: string } }>(
      '/api/v1/namespaces/kruntimes-system/serviceaccounts/kruntimes-fn-workflowrun-controller/token',
      { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 600 } },
    );
    const ctrl = new KubeClient({ server: cluster().server, ca: pkiFile('ca.crt'), token: tok.status.token });
    const forged = {
      'workflows.kruntimes.io/workflowrun-uid': '00000000-0000-0000-0000-000000000000',
      'workflows.kruntimes.io/job': 'build',
    };
    await assert.rejects(
      ctrl.create(`${GROUP}/namespaces/${ns}/runs`, {
        apiVersion: 'kruntimes.io/v1alpha1',
        kind: 'Run',
        metadata: {
          name: 'forged',
          labels: forged,
          ownerReferences: [
            {
              apiVersion: 'kruntimes.io/v1alpha1',
              kind: 'WorkflowRun',
              name: 'fake',
              uid: forged['workflows.kruntimes.io/workflowrun-uid'],
              controller: true,
            },
          ],
        },
        spec: { runtime: 'bash', workspace: { name: 'shared' }, source: { inline: 'true' } },
      }),
      (e: unknown) =>
        isApiError(e, 403) &&
        /Workflow controller may only reference the job workspace of its own WorkflowRun/.test(e.message),
    );
    ctrl.close();
  });

  it('fails closed when the webhook is unreachable', async () => {
    const path = '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/kruntimes';
    const wh = await admin().get<Obj & { webhooks: { name: string; clientConfig: { service: { port: number } } }[] }>(
      path,
    );
    const i = wh.webhooks.findIndex((w) => w.name === 'run-workspace-use.kruntimes.io');
    const port = wh.webhooks[i]!.clientConfig.service.port;
    await admin().patch(
      path,
      [{ op: 'replace', path: `/webhooks/${i}/clientConfig/service/port`, value: 1 }],
      'application/json-patch+json',
    );
    try {
      await eventually('the unreachable webhook to reject', async () => {
        try {
          await createRun(ns, { runtime: 'bash', workspace: { name: 'shared' }, source: { inline: 'true' } });
          return false;
        } catch (e) {
          return isApiError(e) && /failed calling webhook "run-workspace-use.kruntimes.io"/.test(e.message);
        }
      });
    } finally {
      await admin().patch(
        path,
        [{ op: 'replace', path: `/webhooks/${i}/clientConfig/service/port`, value: port }],
        'application/json-patch+json',
      );
    }
  });

  it('deletes the directory and the object on explicit deletion (also with Retain)', async () => {
    await createWs(ns, 'kept', { runtime: 'bash', cleanupPolicy: 'Retain' });
    const w = await bound(ns, 'kept');
    await createRun(
      ns,
      { runtime: 'bash', workspace: { name: 'kept' }, source: { inline: 'echo data > file' } },
      { name: 'fill-kept' },
    );
    await finished(ns, 'fill-kept');
    const dir = hostDir(w.status!.boundPod!, 'kept', pods);
    assert.ok(existsSync(join(dir, 'file')));
    await admin().delete(wsPath(ns, 'kept'));
    await gone(wsPath(ns, 'kept'), 'workspace kept');
    assert.ok(!existsSync(dir), 'runtimed deleted the directory before releasing the finalizer');
  });

  it('expires unused DeleteAfterTTL workspaces through the CronJob sweep, but never Retain ones', async () => {
    await createWs(ns, 'ttl', { runtime: 'bash', ttlSecondsAfterUnused: 1 });
    await createWs(ns, 'retained', { runtime: 'bash', ttlSecondsAfterUnused: 1, cleanupPolicy: 'Retain' });
    await bound(ns, 'ttl');
    await bound(ns, 'retained');
    await new Promise((r) => setTimeout(r, 1500));
    await runCronJobNow('kruntimes-fn-workspace-ttl', `ws-ttl-${process.pid}`);
    await gone(wsPath(ns, 'ttl'), 'workspace ttl');
    assert.equal((await getWs(ns, 'retained')).status?.phase, 'Bound');
  });

  it('becomes Lost when its bound Pod is deleted; Runs using it wait; deletion then needs no runtimed', async () => {
    await createWs(ns, 'fragile', { runtime: 'bash' });
    const w = await bound(ns, 'fragile');
    await admin().delete(`/api/v1/namespaces/${ns}/pods/${w.status?.boundPod}`);
    const lost = await eventually(
      'workspace Lost',
      async () => {
        const x = await getWs(ns, 'fragile');
        return x.status?.phase === 'Lost' ? x : undefined;
      },
      60_000,
    );
    assert.equal(lost.status?.boundPod, w.status?.boundPod, 'never rebound');
    await createRun(
      ns,
      { runtime: 'bash', workspace: { name: 'fragile' }, source: { inline: 'true' } },
      { name: 'on-lost' },
    );
    const r = await eventually('a waiting message', async () => {
      const x = await getRun(ns, 'on-lost');
      return x.status?.message ? x : undefined;
    });
    assert.equal(r.status?.phase, 'Pending');
    assert.match(r.status?.message ?? '', /Lost/);
    await admin().delete(`${GROUP}/namespaces/${ns}/runs/on-lost`);
    await admin().delete(wsPath(ns, 'fragile'));
    await gone(wsPath(ns, 'fragile'), 'workspace fragile');
  });
});

describe('Runtime workspace volume from a PVC', function () {
  let ns: string;
  before(async () => {
    ns = await newNamespace('wspvc');
    await admin().create(`/api/v1/namespaces/${ns}/persistentvolumeclaims`, {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'bash-workspace' },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
    });
    await createRuntime(
      ns,
      'bash',
      bashRuntime({ replicas: 1, workspace: { persistentVolumeClaim: { claimName: 'bash-workspace' } } }),
    );
    await runtimePods(ns, 'bash', 1);
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it('keeps workspace data across a real Runtime Pod replacement (the old workspace is Lost; a new one sees the PVC data)', async () => {
    await createWs(ns, 'durable', { runtime: 'bash' });
    const w = await bound(ns, 'durable');
    await createRun(
      ns,
      { runtime: 'bash', workspace: { name: 'durable' }, source: { inline: 'echo persisted > keep.txt' } },
      { name: 'w1' },
    );
    assert.equal((await finished(ns, 'w1')).status?.phase, 'Succeeded');
    const pvc = await admin().get<Obj>(`/api/v1/namespaces/${ns}/persistentvolumeclaims/bash-workspace`);
    const file = join(E2E_ROOT, 'volumes', String(pvc.spec?.volumeName), 'persistent', 'durable', 'keep.txt');
    assert.ok(existsSync(file));
    await admin().delete(`/api/v1/namespaces/${ns}/pods/${w.status?.boundPod}`);
    const [next] = await eventually('a replacement Runtime Pod', async () => {
      const ps = await runtimePods(ns, 'bash', 1);
      return ps.some((p) => p.metadata.uid === w.status?.boundPodUID) ? undefined : ps;
    });
    assert.notEqual(next?.metadata.uid, w.status?.boundPodUID);
    const lost = await eventually('the old workspace Lost', async () => {
      const x = await getWs(ns, 'durable');
      return x.status?.phase === 'Lost' ? x : undefined;
    });
    assert.equal(lost.status?.boundPodUID, w.status?.boundPodUID, 'never rebound to the replacement');
    await admin().delete(wsPath(ns, 'durable'));
    await gone(wsPath(ns, 'durable'), 'workspace durable');
    assert.ok(existsSync(file), 'a Lost workspace is released without touching the PVC data');
    await createWs(ns, 'durable', { runtime: 'bash' });
    const again = await bound(ns, 'durable');
    assert.equal(again.status?.boundPod, next?.metadata.name);
    await createRun(
      ns,
      {
        runtime: 'bash',
        workspace: { name: 'durable' },
        source: { inline: 'echo "kept=$(cat keep.txt)" >> "$KRUNTIME_OUTPUTS"' },
      },
      { name: 'w2' },
    );
    const r = await finished(ns, 'w2');
    assert.equal(r.status?.phase, 'Succeeded', r.status?.message);
    assert.deepEqual(r.status?.outputs, { kept: 'persisted' });
  });
});
