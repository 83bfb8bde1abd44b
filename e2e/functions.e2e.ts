/**
 * The functions runtime as deployed from the e2e fixture overlay (the local overlay plus the
 * sample functions of e2e/fixtures/functions): a watch function reacting to a created object, no
 * lost work when the server process is killed mid-burst, a CronJob-triggered function running as
 * a Job, the admission router through the API server, and the server's metrics.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { get } from 'node:http';
import { join } from 'node:path';
import { isApiError } from '../lib/kube/errors.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { E2E_ROOT } from './cluster.ts';
import { admin, deleteNamespace, eventually, newNamespace, runCronJobNow, type Obj } from './helpers.ts';

const SYS = 'kruntimes-system';
type Cm = KubeObject & { data?: Record<string, string> };
type PodObj = Obj & {
  spec: { nodeName: string };
  status?: { podIP?: string; phase?: string; containerStatuses?: { restartCount: number; ready: boolean }[] };
};

async function serverPod(): Promise<PodObj> {
  return eventually('a ready extension API server Pod', async () => {
    const pods = await admin().list<PodObj>(`/api/v1/namespaces/${SYS}/pods`, {
      labelSelector: 'app.kubernetes.io/name=kruntimes-extension',
    });
    return pods.items.find((p) => p.status?.containerStatuses?.[0]?.ready && !p.metadata.deletionTimestamp);
  });
}

function httpText(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    get(url, (res) => {
      let b = '';
      res
        .on('data', (c: Buffer) => {
          b += c.toString();
        })
        .on('end', () => resolve(b));
    }).on('error', reject);
  });
}

const echoOf = (ns: string, name: string): Promise<Cm | undefined> =>
  admin()
    .get<Cm>(`/api/v1/namespaces/${ns}/configmaps/${name}-echo`)
    .catch((err: unknown) => {
      if (isApiError(err, 404)) return undefined;
      throw err;
    });

describe('functions runtime (extension API server from the local overlay)', function () {
  let ns: string;
  before(async () => {
    ns = await newNamespace('fn');
    await serverPod();
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it('a watch function reacts to a created object', async () => {
    const t0 = Date.now();
    await admin().create(`/api/v1/namespaces/${ns}/configmaps`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'first', labels: { 'kruntimes.io/sample': 'echo' } },
      data: { hello: 'world' },
    });
    const echo = await eventually('the echo ConfigMap', () => echoOf(ns, 'first'), 30_000, 5);
    process.stderr.write(`      (event-to-result ${Date.now() - t0} ms)\n`);
    assert.deepEqual(echo.data, { hello: 'world' });
    assert.equal(echo.metadata.ownerReferences?.[0]?.name, 'first');
  });

  it('loses no work when the server process is killed mid-burst', async () => {
    const N = 150;
    const pod = await serverPod();
    const pidFile = join(E2E_ROOT, 'nodes', pod.spec.nodeName, 'pods', pod.metadata.uid ?? '', 'pids', 'server');
    const restarts = pod.status?.containerStatuses?.[0]?.restartCount ?? 0;
    const creates: Promise<unknown>[] = [];
    for (let i = 0; i < N; i++) {
      creates.push(
        admin().create(`/api/v1/namespaces/${ns}/configmaps`, {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: `burst-${i}`, labels: { 'kruntimes.io/sample': 'echo' } },
          data: { i: String(i) },
        }),
      );
      if (i === Math.floor(N / 3)) {
        await Promise.all(creates.splice(0));
        process.kill(Number(readFileSync(pidFile, 'utf8').trim()), 'SIGKILL');
      }
    }
    await Promise.all(creates);
    for (let i = 0; i < N; i += 10) {
      await admin().patch(`/api/v1/namespaces/${ns}/configmaps/burst-${i}`, {
        data: { i: String(i), changed: 'after-kill' },
      });
    }
    await eventually(
      'the server container to be restarted',
      async () => ((await serverPod()).status?.containerStatuses?.[0]?.restartCount ?? 0) > restarts,
    );
    await eventually(
      `all ${N} echoes to match their sources exactly`,
      async () => {
        const all = (await admin().list<Cm>(`/api/v1/namespaces/${ns}/configmaps`)).items;
        const byName = new Map(all.map((c) => [c.metadata.name, c]));
        for (let i = 0; i < N; i++) {
          const src = byName.get(`burst-${i}`);
          const echo = byName.get(`burst-${i}-echo`);
          if (!src || !echo) return false;
          assert.ok(src.data);
          if (JSON.stringify(echo.data) !== JSON.stringify(src.data)) return false;
        }
        return true;
      },
      90_000,
      200,
    );
  });

  it('a CronJob-triggered function runs as a Job and completes', async () => {
    const past = new Date(Date.now() - 60_000).toISOString();
    const future = new Date(Date.now() + 3_600_000).toISOString();
    for (const [name, at] of [
      ['expired', past],
      ['fresh', future],
    ] as const) {
      await admin().create(`/api/v1/namespaces/${ns}/configmaps`, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name, labels: { 'kruntimes.io/sample': 'sweep' }, annotations: { 'kruntimes.io/expires-at': at } },
      });
    }
    await runCronJobNow('kruntimes-fn-sample-sweep', `sweep-manual-${process.pid}`);
    await assert.rejects(admin().get(`/api/v1/namespaces/${ns}/configmaps/expired`), (e: unknown) =>
      isApiError(e, 404),
    );
    assert.equal((await admin().get(`/api/v1/namespaces/${ns}/configmaps/fresh`)).metadata.name, 'fresh');
  });

  it('the admission router answers through the API server, fail closed', async () => {
    const cm = (name: string, data: Record<string, string>): object => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name, labels: { 'kruntimes.io/sample': 'policy' } },
      data,
    });
    await assert.rejects(
      admin().create(`/api/v1/namespaces/${ns}/configmaps`, cm('no-owner', { x: '1' })),
      (e: unknown) =>
        isApiError(e) &&
        /admission webhook "sample-policy.kruntimes.io" denied the request: data.owner: Required value/.test(e.message),
    );
    await admin().create(`/api/v1/namespaces/${ns}/configmaps`, cm('with-owner', { owner: 'team-a' }));
  });

  it('serves metrics and health on the Pod IP', async () => {
    const pod = await serverPod();
    const metrics = await httpText(`http://${pod.status?.podIP}:8080/metrics`);
    assert.match(metrics, /controller_runtime_reconcile_total\{controller="sample-echo",result="success"\} \d+/);
    assert.match(metrics, /kruntimes_admission_requests_total\{function="sample-policy",allowed="false"\} \d+/);
    assert.equal(await httpText(`http://${pod.status?.podIP}:8080/readyz`), 'ok');
  });
});
