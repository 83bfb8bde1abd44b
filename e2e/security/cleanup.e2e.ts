/**
 * Issue 11, item 7 and the fencing part of item 12, on the real cluster:
 * - artifact cleanup finishes without the Run's original Runtime Pod (Pod replaced; namespace
 *   deleted after the seed demo workflow; Runtime deleted first), and for an S3 store covered by
 *   the run-artifact-gc function's own credentials (Secret kruntimes-system/kruntimes-artifact-gc,
 *   ADR 0022) no byte of the Run or the namespace is left in the bucket;
 * - a Run runs at most once at a time: a runtimed frozen with SIGSTOP while its Run executes has
 *   that execution killed by the execution lease before the reaper reschedules the Run, and once
 *   resumed it never writes the rescheduled Run's status.
 */
import assert from 'node:assert/strict';
import { appendFileSync, chmodSync, existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { parse, parseAllDocuments } from 'yaml';
import { isApiError } from '../../lib/kube/errors.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { ListWatch } from '../../lib/kube/watch.ts';
import { REPO_ROOT } from '../../localenv/paths.ts';
import { renderRun } from '../../cli/wf/commands.ts';
import { E2E_ROOT } from '../cluster.ts';
import { admin, deleteNamespace, eventually, newNamespace } from '../helpers.ts';
import {
  GROUP,
  bashRuntime,
  cond,
  createRun,
  createRuntime,
  filesystemStoreRuntime,
  finished,
  getRun,
  phase,
  runtimePods,
  type RunObj,
  withS3Store,
} from '../runs-helpers.ts';
import { startS3Server, type S3Server } from '../s3-server.ts';

const FINALIZER = 'kruntimes.io/artifact-cleanup';
const PLATFORM_NS = 'kruntimes-system';
const GC_SECRET = 'kruntimes-artifact-gc';

async function deleteGcSecret(): Promise<void> {
  await admin()
    .delete(`/api/v1/namespaces/${PLATFORM_NS}/secrets/${GC_SECRET}`)
    .catch((e: unknown) => {
      if (!isApiError(e, 404)) throw e;
    });
}
const PRODUCE = 'echo "hello artifact" > "$KRUNTIME_ARTIFACTS_DIR/dist.txt"';
type Ref = { name: string; location: { filesystem?: { path: string }; s3?: { bucket: string; key: string } } };
const refs = (r: RunObj): Ref[] => (r.status?.artifactRefs ?? []) as unknown as Ref[];

async function runGone(ns: string, name: string, timeoutMs = 90_000): Promise<void> {
  await eventually(
    `Run ${name} to be deleted (finalizer released)`,
    async () =>
      getRun(ns, name).then(
        () => false,
        (e: unknown) => isApiError(e, 404),
      ),
    timeoutMs,
    200,
  );
}

async function s3Keys(s3: S3Server, prefix: string): Promise<string[]> {
  const out = await s3.client.send(new ListObjectsV2Command({ Bucket: 'kruntimes-artifacts', Prefix: prefix }));
  return (out.Contents ?? []).map((o) => o.Key ?? '');
}

describe('security: artifact cleanup without the original Runtime Pod (issue 11 item 7)', function () {
  this.timeout(300_000);
  let s3: S3Server;
  before(async () => {
    s3 = await startS3Server('kruntimes-artifacts');
    await deleteGcSecret();
    // The function's own credentials, bound to this bucket and this server's endpoint.
    await admin().create(`/api/v1/namespaces/${PLATFORM_NS}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: GC_SECRET, labels: { 'app.kubernetes.io/part-of': 'kruntimes' } },
      stringData: {
        bucket: 'kruntimes-artifacts',
        endpoint: s3.endpoint,
        AWS_ACCESS_KEY_ID: s3.accessKey,
        AWS_SECRET_ACCESS_KEY: s3.secretKey,
      },
    });
  });
  after(async () => {
    await deleteGcSecret();
    s3.stop();
  });

  it('deletes the artifacts of a Run whose Runtime Pod was replaced, through another Pod of the Runtime', async () => {
    const ns = await newNamespace('gc-replaced');
    try {
      const [pod] = await filesystemStoreRuntime(ns, 1);
      await createRun(ns, { runtime: 'bash', source: { inline: PRODUCE } }, { name: 'producer' });
      const p = await finished(ns, 'producer');
      assert.equal(p.status?.phase, 'Succeeded', p.status?.message);
      assert.ok((p.metadata.finalizers ?? []).includes(FINALIZER));
      const pvc = await admin().get<RunObj>(`/api/v1/namespaces/${ns}/persistentvolumeclaims/artifacts`);
      const files = refs(p).map((r) =>
        join(E2E_ROOT, 'volumes', String(pvc.spec.volumeName), r.location.filesystem!.path),
      );
      assert.ok(files.length > 0 && files.every((f) => existsSync(f)), 'the artifact is on the volume');

      await admin().delete(`/api/v1/namespaces/${ns}/pods/${pod!.metadata.name}`);
      await eventually('the replacement Runtime Pod', async () => {
        const pods = await runtimePods(ns, 'bash', 1);
        return pods.some((x) => x.metadata.uid !== pod!.metadata.uid) || undefined;
      });
      await admin().delete(`${GROUP}/namespaces/${ns}/runs/producer`);
      await runGone(ns, 'producer');
      for (const f of files) assert.ok(!existsSync(f), `${f} was deleted from the store`);
    } finally {
      await deleteNamespace(ns);
    }
  });

  it('finishes deleting a namespace after the seed demo workflow', async () => {
    const ns = await newNamespace('gc-nsdel');
    for (const doc of parseAllDocuments(
      readFileSync(join(REPO_ROOT, 'examples/workflows/runtime-bash.yaml'), 'utf8'),
    ).map((d) => d.toJSON() as KubeObject & { kind: string; spec: Record<string, unknown> })) {
      if (doc.kind !== 'Runtime') continue;
      // The seed's Runtime verbatim except its store: an S3 bucket outlives the namespace, so the
      // test can see that the bytes were deleted (a Filesystem PV is removed with the namespace).
      await admin().create(`${GROUP}/namespaces/${ns}/runtimes`, { ...doc, spec: await withS3Store(ns, s3, doc.spec) });
    }
    await runtimePods(ns, 'bash', 2);
    const wf = parse(
      readFileSync(join(REPO_ROOT, 'examples/workflows/ci-data-sharing-demo.yaml'), 'utf8'),
    ) as KubeObject;
    await admin().create(`${GROUP}/namespaces/${ns}/workflows`, wf);
    await eventually('Workflow Ready', async () =>
      (
        await admin().get<KubeObject & { status?: { conditions?: { type: string; status: string }[] } }>(
          `${GROUP}/namespaces/${ns}/workflows/ci-data-sharing-demo`,
        )
      ).status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
    );
    await admin().create(`${GROUP}/namespaces/${ns}/workflowruns`, renderRun(wf as never, {}, 'demo'));
    const w = await eventually(
      'the demo WorkflowRun to finish',
      async () => {
        const x = await admin().get<KubeObject & { status?: { phase?: string; message?: string } }>(
          `${GROUP}/namespaces/${ns}/workflowruns/demo`,
        );
        return ['Succeeded', 'Failed', 'Cancelled'].includes(x.status?.phase ?? '') ? x : undefined;
      },
      120_000,
    );
    assert.equal(w.status?.phase, 'Succeeded', w.status?.message);
    const prefix = `e2e/namespaces/${ns}/`;
    assert.ok((await s3Keys(s3, prefix)).length > 0, 'the demo stored its artifact in the bucket');

    await deleteNamespace(ns);
    await eventually(
      `namespace ${ns} to be deleted`,
      async () =>
        admin()
          .get(`/api/v1/namespaces/${ns}`)
          .then(
            () => false,
            (e: unknown) => isApiError(e, 404),
          ),
      180_000,
      500,
    );
    // Every Run's finalizer is released only after its bytes were deleted (by a draining
    // runtimed or by run-artifact-gc), so nothing of the namespace may be left in the bucket.
    assert.deepEqual(await s3Keys(s3, prefix), [], 'no byte of the deleted namespace is left in the store');
  });

  it('deletes the bytes of a Run whose Runtime was deleted first, without any Runtime Pod', async () => {
    const ns = await newNamespace('gc-rtfirst');
    try {
      await createRuntime(ns, 'bash', await withS3Store(ns, s3, bashRuntime({ replicas: 1 })));
      await runtimePods(ns, 'bash', 1);
      await createRun(ns, { runtime: 'bash', source: { inline: PRODUCE } }, { name: 'producer' });
      const p = await finished(ns, 'producer');
      assert.equal(p.status?.phase, 'Succeeded', p.status?.message);
      const runPrefix = `e2e/namespaces/${ns}/runs/${p.metadata.uid}/`;
      assert.ok((await s3Keys(s3, runPrefix)).length > 0, 'the Run stored its artifact in the bucket');

      await admin().delete(`${GROUP}/namespaces/${ns}/runtimes/bash`);
      await eventually('the Runtime Pods to be gone', async () => {
        const pods = await admin().list(`/api/v1/namespaces/${ns}/pods`, { labelSelector: 'runtime=bash' });
        return pods.items.length === 0;
      });
      await admin().delete(`${GROUP}/namespaces/${ns}/runs/producer`);
      await runGone(ns, 'producer');
      assert.deepEqual(await s3Keys(s3, runPrefix), [], "the Run's bytes were deleted before its finalizer went");
    } finally {
      await deleteNamespace(ns);
    }
  });
});

type PodObj = KubeObject & { spec: { nodeName: string } };

describe('security: a Run runs at most once at a time (issue 11 item 12, fencing)', function () {
  this.timeout(300_000);
  let ns: string;
  before(async () => {
    ns = await newNamespace('fence');
    await createRuntime(ns, 'bash', bashRuntime({ replicas: 1 }));
    await runtimePods(ns, 'bash', 1);
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it('kills the execution of a frozen runtimed before the reaper reschedules, and the old runtimed never writes the new attempt', async () => {
    // A host directory the Run's non-root user may write (the environment's own is 0700).
    const dir = join(REPO_ROOT, '.kruntimes', 'fence-test', ns);
    mkdirSync(dir, { recursive: true });
    chmodSync(dir, 0o777);
    const mark = join(dir, 'marker');
    appendFileSync(mark, '');
    chmodSync(mark, 0o666);
    const script = [
      `if [ -e "${mark}.first" ]; then echo "second=yes" >> "$KRUNTIME_OUTPUTS"; exit 0; fi`,
      `touch "${mark}.first"`,
      `while :; do echo tick >> "${mark}"; sleep 0.2; done`,
    ].join('\n');
    await createRun(
      ns,
      {
        runtime: 'bash',
        source: { inline: script },
        retryPolicy: { maxAttempts: 8, backoff: '100ms', retryableReasons: ['PodUnhealthy', 'PodGone', 'Fenced'] },
      },
      { name: 'looper' },
    );
    const running = await phase(ns, 'looper', 'Running');
    await eventually('the first execution to write its marker', () => Promise.resolve(statSync(mark).size > 0));
    const seen: RunObj[] = [];
    const watch = new ListWatch<RunObj>(
      admin(),
      { path: `${GROUP}/namespaces/${ns}/runs`, fieldSelector: 'metadata.name=looper' },
      (d) => {
        if (d.type !== 'deleted') seen.push(d.object);
      },
    );
    watch.start();
    const pod = await admin().get<PodObj>(`/api/v1/namespaces/${ns}/pods/${running.status?.assignedPod}`);
    const pid = Number(
      readFileSync(
        join(E2E_ROOT, 'nodes', pod.spec.nodeName, 'pods', pod.metadata.uid ?? '', 'pids', 'runtimed'),
        'utf8',
      ).trim(),
    );
    process.kill(pid, 'SIGSTOP');
    let sizeAtReschedule = -1;
    let rescheduledAt = -1;
    try {
      await eventually(
        'the reaper to reschedule the Run',
        () => {
          const i = seen.findIndex((r) => (r.status?.attempt ?? 1) >= 2 && r.status?.phase !== 'Running');
          return Promise.resolve(i >= 0 ? i : undefined);
        },
        120_000,
        50,
      ).then((i) => {
        rescheduledAt = i;
      });
      sizeAtReschedule = statSync(mark).size;
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    const done = await finished(ns, 'looper', 120_000);
    watch.stop();
    assert.equal(done.status?.phase, 'Succeeded', done.status?.message);
    assert.deepEqual(done.status?.outputs, { second: 'yes' });
    assert.equal(statSync(mark).size, sizeAtReschedule, 'the old execution wrote nothing after the reschedule');
    const after = seen.slice(rescheduledAt);
    for (const r of after) {
      const running = cond(r, 'Running');
      assert.notEqual(running?.reason, 'Fenced', `the fenced execution wrote status: ${JSON.stringify(r.status)}`);
      assert.ok(!['Failed', 'Cancelled'].includes(r.status?.phase ?? ''), JSON.stringify(r.status));
    }
  });
});
