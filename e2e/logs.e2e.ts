/**
 * Run logs through API aggregation (logs.kruntimes.io) and the krt CLI: RBAC on runs/log with
 * resourceNames, no mixing of Runs sharing a Pod, follow to the end, exactly-once delivery
 * across many cursor reconnects, and 409 once the Runtime Pod is gone.
 */
import assert from 'node:assert/strict';
import { isApiError } from '../lib/kube/errors.ts';
import { cluster } from './cluster.ts';
import {
  admin,
  apiServiceAvailable,
  deleteNamespace,
  eventually,
  newNamespace,
  serviceAccountClient,
} from './helpers.ts';
import { krt, saKubeconfig } from './krt.ts';
import { bashRuntime, createRun, createRuntime, finished, getRun, phase, runtimePods } from './runs-helpers.ts';

const LOGS = (ns: string, run: string): string => `/apis/logs.kruntimes.io/v1alpha1/namespaces/${ns}/runs/${run}/log`;
type Snap = { items: { message: string; stream: string }[]; cursor?: string };

/** Reads an NDJSON log stream to its end: how many records, and the last one's message. */
async function countRecords(res: AsyncIterable<unknown>): Promise<{ count: number; lastMsg: string }> {
  let buf = '';
  let count = 0;
  let lastMsg = '';
  for await (const chunk of res) {
    buf += (chunk as Buffer).toString();
    const lines = buf.split('\n');
    buf = lines.pop() ?? '';
    for (const l of lines.filter(Boolean)) {
      count++;
      lastMsg = (JSON.parse(l) as { message: string }).message;
    }
  }
  return { count, lastMsg };
}

describe('Run logs through the aggregated API and krt', function () {
  let ns: string;
  before(async () => {
    ns = await newNamespace('logs');
    await createRuntime(ns, 'bash', bashRuntime({ replicas: 1, capacity: { resources: { runs: '4' } } }));
    await runtimePods(ns, 'bash', 1);
    await apiServiceAvailable('logs.kruntimes.io');
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it('serves discovery with runs/log', async () => {
    const list = await admin().get<
      { metadata?: object; resources: { name: string; verbs: string[] }[] } & { metadata: object }
    >('/apis/logs.kruntimes.io/v1alpha1');
    assert.deepEqual(list.resources.find((r) => r.name === 'runs/log')?.verbs, ['get']);
  });

  it('keeps Runs sharing a Pod apart, and a runs/log grant for one named Run allows only that Run', async () => {
    await createRun(
      ns,
      {
        runtime: 'bash',
        source: { inline: 'for i in $(seq 1 20); do echo "alpha $i"; sleep 0.02; done; echo "alpha-err" >&2' },
      },
      { name: 'alpha' },
    );
    await createRun(
      ns,
      { runtime: 'bash', source: { inline: 'for i in $(seq 1 20); do echo "beta $i"; sleep 0.02; done' } },
      { name: 'beta' },
    );
    const a = await finished(ns, 'alpha');
    const b = await finished(ns, 'beta');
    assert.equal(a.status?.assignedPod, b.status?.assignedPod, 'both Runs ran on the same Runtime Pod');
    const snap = await admin().request<Snap>('GET', LOGS(ns, 'alpha'));
    assert.deepEqual(
      snap.items.filter((i) => i.stream === 'stdout').map((i) => i.message),
      Array.from({ length: 20 }, (_, i) => `alpha ${i + 1}`),
    );
    assert.deepEqual(
      snap.items.filter((i) => i.stream === 'stderr').map((i) => i.message),
      ['alpha-err'],
    );
    assert.equal((await admin().request<Snap>('GET', LOGS(ns, 'alpha'), { query: { tailLines: 3 } })).items.length, 3);

    await admin().create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'alpha-logs' },
      rules: [{ apiGroups: ['logs.kruntimes.io'], resources: ['runs/log'], resourceNames: ['alpha'], verbs: ['get'] }],
    });
    await admin().create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'alpha-logs' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'alpha-logs' },
      subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace: ns }],
    });
    const reader = await saKubeconfig(ns, 'reader');
    let lastErr = '';
    const ok = await eventually(
      'krt logs alpha as the reader',
      async () => {
        const r = await krt(['logs', 'alpha'], reader);
        lastErr = r.stderr;
        return r.code === 0 ? r : undefined;
      },
      20_000,
    ).catch((e: Error) => {
      throw new Error(`${e.message}: ${lastErr}`);
    });
    assert.equal(ok.stdout, Array.from({ length: 20 }, (_, i) => `alpha ${i + 1}\n`).join(''));
    const denied = await krt(['logs', 'beta'], reader);
    assert.equal(denied.code, 1);
    assert.match(denied.stderr, /cannot get resource "runs\/log" in API group "logs.kruntimes.io"/);
    const nobody = await krt(['logs', 'alpha'], await saKubeconfig(ns, 'nobody'));
    assert.equal(nobody.code, 1);
    assert.match(nobody.stderr, /forbidden/i);
  });

  it('follows a running Run to its end with krt logs -f', async () => {
    await createRun(
      ns,
      { runtime: 'bash', source: { inline: 'for i in $(seq 1 15); do echo "tick $i"; sleep 0.1; done' } },
      { name: 'ticker' },
    );
    await phase(ns, 'ticker', 'Running').catch(() => undefined);
    const r = await krt(['logs', '-f', 'ticker', '-n', ns], cluster().kubeconfig);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, Array.from({ length: 15 }, (_, i) => `tick ${i + 1}\n`).join(''));
  });

  it('follows a Run that writes as fast as it can through to its very last record', async () => {
    // 60000 short lines stay under the Runtime Server's 1 MiB per-stream output cap.
    const N = 60_000;
    await createRun(
      ns,
      { runtime: 'bash', source: { inline: `sleep 1; for i in $(seq 1 ${N}); do echo "fast $i"; done` } },
      { name: 'firehose' },
    );
    await eventually('firehose to be assigned', async () => !!(await getRun(ns, 'firehose')).status?.assignedPod);
    const res = await admin().stream(LOGS(ns, 'firehose'), { query: { follow: 'true' } });
    const { count, lastMsg } = await countRecords(res);
    assert.equal(count, N);
    assert.equal(lastMsg, `fast ${N}`);
  });

  it('delivers every record to a follower that reads slowly after the Run has ended', async () => {
    // The follow must end at runtimed's end-of-log marker, not at a fixed delay after the terminal
    // status: a reader that is not reading holds the Pod log stream paused far longer than that.
    // Both streams at the Runtime Server's cap: ~28 MB of records, more than the socket buffers
    // between here and the extension server hold, so the Pod log stream really stays paused.
    const N = 120_000;
    await createRun(
      ns,
      {
        runtime: 'bash',
        source: {
          inline: `sleep 1; for i in $(seq 1 ${N / 2}); do echo "s$i"; echo "e$i" >&2; done`,
        },
      },
      { name: 'slow-reader' },
    );
    await eventually('slow-reader to be assigned', async () => !!(await getRun(ns, 'slow-reader')).status?.assignedPod);
    const res = await admin().stream(LOGS(ns, 'slow-reader'), { query: { follow: 'true' } });
    res.pause();
    await eventually(
      'slow-reader to succeed',
      async () => (await getRun(ns, 'slow-reader')).status?.phase === 'Succeeded',
    );
    await new Promise((r) => setTimeout(r, 3000));
    const { count, lastMsg } = await countRecords(res);
    assert.equal(count, N);
    assert.ok([`s${N / 2}`, `e${N / 2}`].includes(lastMsg), `last record ${lastMsg}`);
  });

  it('delivers every line exactly once across many reconnects with the cursor', async () => {
    const N = 300;
    await createRun(
      ns,
      {
        runtime: 'bash',
        source: { inline: `for i in $(seq 1 ${N}); do echo "line $i"; [ $((i % 50)) -eq 0 ] && sleep 0.1; done` },
      },
      { name: 'chatty' },
    );
    await eventually('chatty to be assigned', async () => !!(await getRun(ns, 'chatty')).status?.assignedPod);
    const got: string[] = [];
    let cursor: string | undefined;
    let reconnects = 0;
    for (;;) {
      const res = await admin().stream(LOGS(ns, 'chatty'), {
        query: { follow: 'true', ...(cursor ? { cursor } : {}) },
      });
      const take = 1 + ((reconnects * 7) % 23);
      let buf = '';
      let taken = 0;
      let ended = true;
      for await (const chunk of res) {
        buf += (chunk as Buffer).toString();
        const lines = buf.split('\n');
        buf = lines.pop() ?? '';
        for (const l of lines.filter(Boolean)) {
          const item = JSON.parse(l) as { message: string; cursor: string };
          got.push(item.message);
          cursor = item.cursor;
          if (++taken >= take) break;
        }
        if (taken >= take) {
          ended = false;
          res.destroy();
          break;
        }
      }
      if (ended) break;
      reconnects++;
    }
    assert.ok(reconnects >= 10, `reconnected ${reconnects} times`);
    assert.deepEqual(
      got,
      Array.from({ length: N }, (_, i) => `line ${i + 1}`),
    );
  });

  it('answers 409 Conflict with a metav1.Status once the Runtime Pod is gone', async () => {
    await createRun(ns, { runtime: 'bash', source: { inline: 'echo last words' } }, { name: 'orphaned' });
    const r = await finished(ns, 'orphaned');
    await admin().delete(`/api/v1/namespaces/${ns}/pods/${r.status?.assignedPod}`);
    await eventually('the Runtime Pod to be gone', async () => {
      try {
        await admin().get(`/api/v1/namespaces/${ns}/pods/${r.status?.assignedPod}`);
        return false;
      } catch (e) {
        return isApiError(e, 404);
      }
    });
    await assert.rejects(
      admin().request('GET', LOGS(ns, 'orphaned')),
      (e: unknown) => isApiError(e, 409) && /no longer exists/.test(e.message),
    );
    const sa = await serviceAccountClient(ns, 'default');
    await assert.rejects(sa.request('GET', LOGS(ns, 'orphaned')), (e: unknown) => isApiError(e, 403));
  });
});
