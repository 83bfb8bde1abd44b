/**
 * The foundation against the real control plane: namespaces and ServiceAccounts, a
 * Deployment and a batch/v1 Job through the real controller-manager and scheduler on the
 * node agent, pods/log through the API server, Pod deletion ending the process, RBAC,
 * a loopback validating webhook and a loopback APIService reached through the API server.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isApiError } from '../lib/kube/errors.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { E2E_NODES, E2E_ROOT } from './cluster.ts';
import { admin, deleteNamespace, eventually, newNamespace, serviceAccountClient, type Obj } from './helpers.ts';

const IMAGE = 'ghcr.io/kruntimes/kruntimes:dev';
type PodObj = Obj & {
  status?: {
    phase?: string;
    podIP?: string;
    containerStatuses?: {
      state: Record<string, { exitCode?: number; reason?: string; message?: string }>;
      restartCount: number;
      ready: boolean;
    }[];
    conditions?: { type: string; status: string }[];
  };
};

async function podsOf(ns: string, selector: string): Promise<PodObj[]> {
  return (await admin().list<PodObj>(`/api/v1/namespaces/${ns}/pods`, { labelSelector: selector })).items;
}

describe('foundation: the real control plane with the node agent', function () {
  let ns: string;
  before(async () => {
    ns = await newNamespace('found');
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it('creates a namespace and a ServiceAccount', async () => {
    await admin().create(`/api/v1/namespaces/${ns}/serviceaccounts`, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'worker' },
    });
    const sa = await admin().get(`/api/v1/namespaces/${ns}/serviceaccounts/worker`);
    assert.equal(sa.metadata.name, 'worker');
    const nodes = await admin().list('/api/v1/nodes');
    assert.deepEqual(nodes.items.map((n) => n.metadata.name).sort(), E2E_NODES);
  });

  it('runs a batch/v1 Job to completion and serves its logs through pods/log', async () => {
    await admin().create(`/apis/batch/v1/namespaces/${ns}/jobs`, {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name: 'hello' },
      spec: {
        backoffLimit: 0,
        template: {
          spec: {
            restartPolicy: 'Never',
            containers: [
              {
                name: 'main',
                image: IMAGE,
                args: ['demo-job'],
                env: [
                  { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
                  { name: 'DEMO_STEPS', value: '4' },
                ],
              },
            ],
          },
        },
      },
    });
    const job = await eventually('Job hello to complete', async () => {
      const j = await admin().get<
        Obj & { status?: { succeeded?: number; conditions?: { type: string; status: string }[] } }
      >(`/apis/batch/v1/namespaces/${ns}/jobs/hello`);
      return j.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True') ? j : undefined;
    });
    assert.equal(job.status?.succeeded, 1);
    const [pod] = await podsOf(ns, 'job-name=hello');
    assert.ok(pod);
    assert.equal(pod.status?.phase, 'Succeeded');
    assert.equal(pod.status?.containerStatuses?.[0]?.state.terminated?.exitCode, 0);
    assert.match(pod.status?.podIP ?? '', /^127\./);
    const log = await admin().getText(`/api/v1/namespaces/${ns}/pods/${pod.metadata.name}/log`);
    assert.equal(
      log,
      [1, 2, 3, 4].map((i) => `demo-job step ${i}/4 on ${pod.metadata.name} (pod IP ${pod.status?.podIP})\n`).join('') +
        'demo-job done\n',
    );
    const tail = await admin().getText(`/api/v1/namespaces/${ns}/pods/${pod.metadata.name}/log`, { tailLines: 1 });
    assert.equal(tail, 'demo-job done\n');
  });

  it('records a failing container exit code and a failed Job', async () => {
    await admin().create(`/apis/batch/v1/namespaces/${ns}/jobs`, {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name: 'fails' },
      spec: {
        backoffLimit: 0,
        template: {
          spec: {
            restartPolicy: 'Never',
            containers: [
              { name: 'main', image: IMAGE, args: ['demo-job', '7'], env: [{ name: 'DEMO_STEPS', value: '1' }] },
            ],
          },
        },
      },
    });
    await eventually('Job fails to fail', async () => {
      const j = await admin().get<Obj & { status?: { conditions?: { type: string; status: string }[] } }>(
        `/apis/batch/v1/namespaces/${ns}/jobs/fails`,
      );
      return j.status?.conditions?.some((c) => c.type === 'Failed' && c.status === 'True');
    });
    const [pod] = await podsOf(ns, 'job-name=fails');
    assert.equal(pod?.status?.phase, 'Failed');
    assert.equal(pod?.status?.containerStatuses?.[0]?.state.terminated?.exitCode, 7);
  });

  it('runs a Deployment whose Pods become Ready through an HTTP readiness probe', async () => {
    await admin().create(`/apis/apps/v1/namespaces/${ns}/deployments`, {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web' },
      spec: {
        replicas: 2,
        selector: { matchLabels: { app: 'web' } },
        template: {
          metadata: { labels: { app: 'web' } },
          spec: {
            terminationGracePeriodSeconds: 5,
            volumes: [{ name: 'scratch', emptyDir: {} }],
            containers: [
              {
                name: 'web',
                image: IMAGE,
                command: ['bash', '-c', 'exec kruntimes demo-server 8080'],
                ports: [{ containerPort: 8080, name: 'http' }],
                readinessProbe: { httpGet: { path: '/healthz', port: 'http' }, periodSeconds: 1 },
                livenessProbe: { exec: { command: ['test', '-d', '/scratch'] }, periodSeconds: 1 },
                env: [{ name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } }],
                volumeMounts: [{ name: 'scratch', mountPath: '/scratch' }],
              },
            ],
          },
        },
      },
    });
    await eventually('Deployment web to be available', async () => {
      const d = await admin().get<Obj & { status?: { availableReplicas?: number } }>(
        `/apis/apps/v1/namespaces/${ns}/deployments/web`,
      );
      return d.status?.availableReplicas === 2;
    });
    const pods = await podsOf(ns, 'app=web');
    assert.equal(pods.length, 2);
    for (const p of pods) {
      assert.equal(p.status?.conditions?.find((c) => c.type === 'Ready')?.status, 'True');
      assert.equal(
        p.status?.containerStatuses?.[0]?.restartCount,
        0,
        'the exec liveness probe runs inside the mount namespace and passes',
      );
    }
    assert.notEqual(pods[0]?.status?.podIP, pods[1]?.status?.podIP, 'every Pod has its own loopback IP');
  });

  it('deleting a Pod ends its process and removes the Pod object', async () => {
    const [pod] = await podsOf(ns, 'app=web');
    assert.ok(pod);
    // The node agent's record of the container's process (the image runs as a non-root user,
    // which may not write a root-owned hostPath, as on a kubelet).
    const pidFile = join(
      E2E_ROOT,
      'nodes',
      pod.spec?.nodeName as string,
      'pods',
      pod.metadata.uid ?? '',
      'pids',
      'web',
    );
    const pid = Number(readFileSync(pidFile, 'utf8').trim());
    assert.ok(pid > 0);
    assert.doesNotThrow(() => process.kill(pid, 0), 'process is running before delete');
    await admin().delete(`/api/v1/namespaces/${ns}/pods/${pod.metadata.name}`);
    await eventually('the Pod object to be gone', async () => {
      try {
        await admin().get(`/api/v1/namespaces/${ns}/pods/${pod.metadata.name}`);
        return false;
      } catch (err) {
        return isApiError(err, 404);
      }
    });
    assert.throws(() => process.kill(pid, 0), /ESRCH/, 'process ended');
    await eventually(
      'the ReplicaSet to replace the Pod',
      async () => (await podsOf(ns, 'app=web')).filter((p) => p.status?.phase === 'Running').length === 2,
    );
    // As on a kubelet, the Pod's directory is removed after the object is gone, not before.
    const podDir = join(E2E_ROOT, 'nodes', pod.spec?.nodeName as string, 'pods', pod.metadata.uid ?? '');
    await eventually('the pod directory to be cleaned up', () => Promise.resolve(!existsSync(podDir)));
  });

  it('RBAC denies a ServiceAccount what it was not granted and allows what it was', async () => {
    const sa = await serviceAccountClient(ns, 'worker');
    await assert.rejects(
      sa.list(`/api/v1/namespaces/${ns}/secrets`),
      (err: unknown) => isApiError(err, 403) && /cannot list resource "secrets"/.test(err.message),
    );
    await assert.rejects(sa.list(`/api/v1/namespaces/${ns}/pods`), (err: unknown) => isApiError(err, 403));
    await admin().create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'pod-reader' },
      rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list'] }],
    });
    await admin().create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'worker-pod-reader' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'pod-reader' },
      subjects: [{ kind: 'ServiceAccount', name: 'worker', namespace: ns }],
    });
    const list = await eventually('the RoleBinding to take effect', () =>
      sa.list<KubeObject>(`/api/v1/namespaces/${ns}/pods`),
    );
    assert.ok(list.items.length >= 2);
    await assert.rejects(sa.list(`/api/v1/namespaces/${ns}/secrets`), (err: unknown) => isApiError(err, 403));
    sa.close();
  });
});
