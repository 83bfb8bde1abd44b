/**
 * Seed 000 (workflow data sharing) read rule by rule on the real cluster: the seed's
 * PersistentWorkspace and Run `ci-build-package` and its Run affinity example applied as written;
 * artifact inputs re-staged idempotently (two steps of one job, an in-place retry) and a different
 * artifact onto the same path refused; the cleanup and loss rules (lastUsedTime when the last Run
 * ends, nil TTL never deletes, Released before the deletion request, Released -> Lost during
 * cleanup, cleanup while the bound Pod is unready, a same-name Pod with a new UID never inherits a
 * binding).
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { renderRun } from '../cli/wf/commands.ts';
import { isApiError } from '../lib/kube/errors.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { ListWatch } from '../lib/kube/watch.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import { E2E_ROOT } from './cluster.ts';
import { admin, deleteNamespace, eventually, newNamespace, runCronJobNow, type Obj } from './helpers.ts';
import {
  GROUP,
  bashRuntime,
  createRun,
  createRuntime,
  finished,
  getRun,
  runtimePods,
  type RunObj,
} from './runs-helpers.ts';
import { bound, createWs, getWs, gone, wsPath, type Ws } from './workspace-helpers.ts';

type Wfr = Obj & {
  status?: {
    phase?: string;
    message?: string;
    jobs?: Record<
      string,
      { phase?: string; steps?: { name: string; runName?: string; outputs?: Record<string, string> }[] }
    >;
  };
};
type Pod = KubeObject & { spec?: { nodeName?: string }; status?: { conditions?: { type: string; status: string }[] } };

const SEED_WORKSPACE = `
apiVersion: kruntimes.io/v1alpha1
kind: PersistentWorkspace
metadata:
  name: ci-build-workspace
spec:
  runtime: bash
  mode: RuntimePodLocal
  ttlSecondsAfterUnused: 3600
  cleanupPolicy: DeleteAfterTTL
`;
const SEED_RUN = `
apiVersion: kruntimes.io/v1alpha1
kind: Run
metadata:
  name: ci-build-package
spec:
  runtime: bash
  workspace:
    name: ci-build-workspace
    kind: PersistentWorkspace
    apiGroup: kruntimes.io/v1alpha1
  source:
    inline: |
      tar -czf "$KRUNTIME_ARTIFACTS_DIR/dist.tgz" src
`;
const SEED_AFFINITY = `
spec:
  affinity:
    runAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - labelSelector:
            matchLabels:
              workflows.kruntimes.io/workflow: ci-data-sharing-demo
              workflows.kruntimes.io/job: build
          topologyKey: kruntimes.io/runtime-pod
`;

type Cond = { type: string; status: string; reason: string; message: string };
const cond = (o: { status?: { conditions?: Cond[] } }, type: string): Cond | undefined =>
  o.status?.conditions?.find((c) => c.type === type);

async function podOf(ns: string, name: string): Promise<Pod> {
  return admin().get<Pod>(`/api/v1/namespaces/${ns}/pods/${name}`);
}
/** The host directory of a Pod's workspace volume (the local node agent keeps volumes on disk). */
function volumeDir(pod: Pod): string {
  return join(E2E_ROOT, 'nodes', pod.spec?.nodeName ?? '', 'pods', pod.metadata.uid ?? '', 'volumes', 'workspace');
}
async function workflowRun(ns: string, name: string, jobs: Record<string, unknown>): Promise<void> {
  await admin().create(`${GROUP}/namespaces/${ns}/workflowruns`, {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'WorkflowRun',
    metadata: { name },
    spec: { jobs },
  });
}
async function wfDone(ns: string, name: string): Promise<Wfr> {
  return eventually(`WorkflowRun ${name} to finish`, async () => {
    const w = await admin().get<Wfr>(`${GROUP}/namespaces/${ns}/workflowruns/${name}`);
    return ['Succeeded', 'Failed', 'Cancelled'].includes(w.status?.phase ?? '') ? w : undefined;
  });
}
/** Runs the TTL sweep now (a Job from the CronJob's template) and waits for it. */
async function sweepNow(tag: string): Promise<void> {
  await runCronJobNow('kruntimes-fn-workspace-ttl', `seed000-${tag}-${process.pid}`);
}

const PRODUCE = {
  'runs-on': 'bash',
  steps: [
    {
      name: 'make',
      run: 'mkdir -p "$KRUNTIME_ARTIFACTS_DIR"; echo alpha > "$KRUNTIME_ARTIFACTS_DIR/a.txt"; echo beta > "$KRUNTIME_ARTIFACTS_DIR/b.txt"',
    },
  ],
};
const importStep = (name: string, artifact: string, run: string): Record<string, unknown> => ({
  name,
  artifacts: [{ from: `jobs.produce.artifacts.${artifact}`, path: 'in/data.txt' }],
  run,
});

describe('seed 000 as written', function () {
  let ns: string;
  /** Every PersistentWorkspace state the API server reported, in order: name -> [phase, deleting]. */
  const seen = new Map<string, [string, boolean][]>();
  let watch: ListWatch<Ws>;
  before(async () => {
    ns = await newNamespace('seed000');
    for (const doc of parseAllDocuments(
      readFileSync(join(REPO_ROOT, 'examples/workflows/runtime-bash.yaml'), 'utf8'),
    ).map((d) => d.toJSON() as KubeObject & { kind: string; spec: Record<string, unknown> })) {
      if (doc.kind === 'Runtime')
        await admin().create(`${GROUP}/namespaces/${ns}/runtimes`, { ...doc, spec: { ...doc.spec, replicas: 2 } });
      else await admin().create(`/api/v1/namespaces/${ns}/persistentvolumeclaims`, doc);
    }
    await runtimePods(ns, 'bash', 2);
    watch = new ListWatch<Ws>(admin(), { path: wsPath(ns) }, (d) => {
      const o = d.object;
      const list = seen.get(o.metadata.name ?? '') ?? [];
      list.push([d.type === 'deleted' ? 'deleted' : (o.status?.phase ?? ''), !!o.metadata.deletionTimestamp]);
      seen.set(o.metadata.name ?? '', list);
    });
    watch.start();
    await watch.synced;
  });
  after(async () => {
    watch.stop();
    await deleteNamespace(ns);
  });

  it("applies the seed's PersistentWorkspace and Run ci-build-package as written", async () => {
    await admin().create(wsPath(ns), parse(SEED_WORKSPACE) as KubeObject);
    const w = await bound(ns, 'ci-build-workspace');
    assert.equal(w.status?.phase, 'Bound');
    await createRun(
      ns,
      {
        runtime: 'bash',
        workspace: { name: 'ci-build-workspace' },
        source: { inline: 'mkdir -p src && echo \'print("hello")\' > src/app.py' },
      },
      { name: 'checkout' },
    );
    assert.equal((await finished(ns, 'checkout')).status?.phase, 'Succeeded');
    await admin().create(`${GROUP}/namespaces/${ns}/runs`, parse(SEED_RUN) as KubeObject);
    const r = await finished(ns, 'ci-build-package');
    assert.equal(r.status?.phase, 'Succeeded', r.status?.message);
    assert.equal(r.status?.assignedPod, w.status?.boundPod);
    const refs = (r.status as { artifactRefs?: { name: string; type: string }[] }).artifactRefs ?? [];
    assert.deepEqual(
      refs.map((x) => [x.name, x.type]),
      [['dist.tgz', 'file']],
    );
  });

  it('imports the same artifact in two steps of one job, refuses a different one onto that path, retries in place', async () => {
    await workflowRun(ns, 'restage', {
      produce: PRODUCE,
      consume: {
        'runs-on': 'bash',
        needs: ['produce'],
        steps: [
          importStep('first', 'a.txt', 'cat in/data.txt'),
          importStep('second', 'a.txt', 'echo "got=$(cat in/data.txt)" >> "$KRUNTIME_OUTPUTS"'),
        ],
      },
    });
    const ok = await wfDone(ns, 'restage');
    assert.equal(ok.status?.phase, 'Succeeded', ok.status?.message ?? JSON.stringify(ok.status?.jobs));
    assert.deepEqual(ok.status?.jobs?.consume?.steps?.[1]?.outputs, { got: 'alpha' });

    await workflowRun(ns, 'clash', {
      produce: PRODUCE,
      consume: {
        'runs-on': 'bash',
        needs: ['produce'],
        steps: [importStep('first', 'a.txt', 'true'), importStep('second', 'b.txt', 'true')],
      },
    });
    const bad = await wfDone(ns, 'clash');
    assert.equal(bad.status?.phase, 'Failed');
    const second = await getRun(ns, bad.status?.jobs?.consume?.steps?.[1]?.runName ?? '');
    assert.equal(cond(second, 'Completed')?.reason, 'ArtifactInputConflict', second.status?.message);
    assert.match(second.status?.message ?? '', /destination already exists with different content/);

    const producer = await getRun(ns, ok.status?.jobs?.produce?.steps?.[0]?.runName ?? '');
    const ref = (producer.status as { artifactRefs?: { name: string }[] }).artifactRefs?.find(
      (x) => x.name === 'a.txt',
    );
    assert.ok(ref);
    await createRun(
      ns,
      {
        runtime: 'bash',
        artifactInputs: [{ path: 'in/data.txt', artifactRef: ref }],
        retryPolicy: { maxAttempts: 2, backoff: '100ms' },
        source: {
          inline:
            'if [ -e tried ]; then echo "got=$(cat in/data.txt)" >> "$KRUNTIME_OUTPUTS"; else touch tried; exit 1; fi',
        },
      },
      { name: 'retry-in-place' },
    );
    const rr = await finished(ns, 'retry-in-place');
    assert.equal(rr.status?.phase, 'Succeeded', rr.status?.message);
    assert.equal((rr.status as { attempt?: number }).attempt, 2);
    assert.deepEqual(rr.status?.outputs, { got: 'alpha' });
  });

  it("labels child Runs and job workspaces so the seed's affinity example selects the build job", async () => {
    const wf = {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'Workflow',
      metadata: { name: 'ci-data-sharing-demo' },
      spec: {
        jobs: {
          build: {
            'runs-on': 'bash',
            steps: [
              { name: 'checkout', run: 'mkdir -p src && sleep 6' },
              { name: 'package', run: 'test -d src' },
            ],
          },
        },
      },
    };
    await admin().create(`${GROUP}/namespaces/${ns}/workflows`, wf);
    await admin().create(`${GROUP}/namespaces/${ns}/workflowruns`, renderRun(wf as never, {}, 'affinity'));
    const selector = 'workflows.kruntimes.io/workflow=ci-data-sharing-demo,workflows.kruntimes.io/job=build';
    const build = await eventually('the build step Run, found by the seed labels, running', async () => {
      const runs = await admin().list<RunObj>(`${GROUP}/namespaces/${ns}/runs`, { labelSelector: selector });
      return runs.items.find((r) => r.status?.phase === 'Running');
    });
    const pws = await admin().list<Ws>(wsPath(ns), { labelSelector: selector });
    assert.equal(pws.items.length, 1, 'the job workspace carries the seed labels too');
    const affinity = (parse(SEED_AFFINITY) as { spec: { affinity: unknown } }).spec.affinity;
    for (const name of ['affine-1', 'affine-2', 'affine-3'])
      await createRun(ns, { runtime: 'bash', affinity, source: { inline: 'true' } }, { name });
    for (const name of ['affine-1', 'affine-2', 'affine-3']) {
      const r = await finished(ns, name);
      assert.equal(r.status?.phase, 'Succeeded', r.status?.message);
      assert.equal(r.status?.assignedPod, build.status?.assignedPod, `${name} ran next to the build job`);
    }
    assert.equal((await wfDone(ns, 'affinity')).status?.phase, 'Succeeded');
  });

  it('sets lastUsedTime when the last Run ends; the sweep writes Released before deleting; a nil TTL is never deleted', async () => {
    await createWs(ns, 'nil-ttl', { runtime: 'bash' });
    await createWs(ns, 'short', { runtime: 'bash', ttlSecondsAfterUnused: 1 });
    const first = await bound(ns, 'nil-ttl');
    await bound(ns, 'short');
    assert.ok(first.status?.lastUsedTime);
    await createRun(
      ns,
      { runtime: 'bash', workspace: { name: 'nil-ttl' }, source: { inline: 'sleep 3' } },
      { name: 'user' },
    );
    await eventually('lastUsedTime cleared while the Run is active', async () => {
      const w = await getWs(ns, 'nil-ttl');
      return w.status?.lastUsedTime === undefined;
    });
    const done = await finished(ns, 'user');
    const after = await eventually(
      'lastUsedTime set again',
      async () => (await getWs(ns, 'nil-ttl')).status?.lastUsedTime,
    );
    assert.ok(Date.parse(after) >= Date.parse(done.status?.startTime ?? ''), `${after} after the Run started`);
    assert.notEqual(after, first.status?.lastUsedTime);
    await new Promise((r) => setTimeout(r, 1500));
    await sweepNow('ttl');
    await gone(wsPath(ns, 'short'), 'workspace short');
    const trail = seen.get('short') ?? [];
    const firstDeleting = trail.find(([, deleting]) => deleting);
    assert.deepEqual(firstDeleting?.[0], 'Released', `Released before the deletion request: ${JSON.stringify(trail)}`);
    assert.ok(
      trail.some(([phase, deleting]) => phase === 'Released' && !deleting),
      JSON.stringify(trail),
    );
    const kept = await getWs(ns, 'nil-ttl');
    assert.equal(kept.status?.phase, 'Bound', 'a nil TTL never deletes');
    assert.equal(kept.metadata.deletionTimestamp, undefined);
  });

  it('Released -> Lost during cleanup: deletion waits for the active Run, then the bound Pod goes', async () => {
    await createWs(ns, 'busy', { runtime: 'bash' });
    const w = await bound(ns, 'busy');
    await createRun(
      ns,
      { runtime: 'bash', workspace: { name: 'busy' }, source: { inline: 'echo x > f; sleep 120' } },
      { name: 'holder' },
    );
    await eventually('holder running', async () => (await getRun(ns, 'holder')).status?.phase === 'Running');
    const pod = await podOf(ns, w.status?.boundPod ?? '');
    const dir = join(volumeDir(pod), 'persistent', 'busy');
    await eventually('the file', () => Promise.resolve(existsSync(join(dir, 'f'))));
    await admin().delete(wsPath(ns, 'busy'));
    const released = await eventually('Released', async () => {
      const x = await getWs(ns, 'busy');
      return x.status?.phase === 'Released' && x.metadata.deletionTimestamp ? x : undefined;
    });
    assert.ok((released.metadata.finalizers ?? []).includes('kruntimes.io/workspace-cleanup'));
    await createRun(ns, { runtime: 'bash', workspace: { name: 'busy' }, source: { inline: 'true' } }).then(
      () => assert.fail('a Released workspace accepts no new Run'),
      (e: unknown) => assert.ok(isApiError(e) && /being deleted/.test(e.message), String(e)),
    );
    assert.ok(existsSync(join(dir, 'f')), 'runtimed keeps the directory while a Run assigned to its Pod uses it');
    await admin().delete(`/api/v1/namespaces/${ns}/pods/${pod.metadata.name}`);
    await gone(wsPath(ns, 'busy'), 'workspace busy', 90_000);
    const trail = (seen.get('busy') ?? []).map(([p]) => p);
    assert.ok(
      trail.indexOf('Released') >= 0 && trail.lastIndexOf('Lost') > trail.indexOf('Released'),
      JSON.stringify(trail),
    );
    await runtimePods(ns, 'bash', 2);
  });

  it('a same-name Pod with a new UID never inherits the binding: the workspace is Lost', async () => {
    const podSpec = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'ghost-0', labels: { runtime: 'ghost' } },
      spec: {
        terminationGracePeriodSeconds: 1,
        containers: [
          { name: 'main', image: 'ghcr.io/kruntimes/kruntimes:dev', command: ['bash', '-c', 'exec sleep 600'] },
        ],
      },
    };
    const ready = (uidNot?: string): Promise<Pod> =>
      eventually('ghost-0 Ready', async () => {
        const p = await podOf(ns, 'ghost-0').catch(() => undefined);
        return p &&
          p.metadata.uid !== uidNot &&
          !p.metadata.deletionTimestamp &&
          p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')
          ? p
          : undefined;
      });
    await admin().create(`/api/v1/namespaces/${ns}/pods`, podSpec);
    const old = await ready();
    await createWs(ns, 'ghost-ws', { runtime: 'ghost' });
    const w = await bound(ns, 'ghost-ws');
    assert.equal(w.status?.boundPodUID, old.metadata.uid);
    await admin().delete(`/api/v1/namespaces/${ns}/pods/ghost-0`);
    await gone(`/api/v1/namespaces/${ns}/pods/ghost-0`, 'the old ghost-0');
    await admin().create(`/api/v1/namespaces/${ns}/pods`, podSpec);
    const replacement = await ready(old.metadata.uid);
    assert.notEqual(replacement.metadata.uid, old.metadata.uid);
    const lost = await eventually('Lost', async () => {
      const x = await getWs(ns, 'ghost-ws');
      return x.status?.phase === 'Lost' ? x : undefined;
    });
    assert.equal(lost.status?.boundPod, 'ghost-0');
    assert.equal(lost.status?.boundPodUID, old.metadata.uid, 'never rebound to the new ghost-0');
    assert.match(cond(lost, 'Bound')?.message ?? '', /no longer exists|was replaced/);
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal((await getWs(ns, 'ghost-ws')).status?.phase, 'Lost', 'still Lost with the same-name Pod Ready');
    await admin().delete(wsPath(ns, 'ghost-ws'));
    await gone(wsPath(ns, 'ghost-ws'), 'workspace ghost-ws');
  });

  it('cleans up on the bound Pod while that Pod is unready, waiting Runs say why, and nothing is rebound', async () => {
    await createRuntime(
      ns,
      'flaky',
      bashRuntime({
        replicas: 1,
        template: {
          spec: {
            containers: [
              {
                name: 'runtime',
                image: 'ghcr.io/kruntimes/bash-runtime:v0.0.3',
                args: ['--port=9091', '--work-dir=/workspace'],
                readinessProbe: { exec: { command: ['sh', '-c', 'test ! -e /workspace/unready'] }, periodSeconds: 1 },
              },
            ],
          },
        },
      }),
    );
    const [pod] = await runtimePods(ns, 'flaky', 1);
    await createWs(ns, 'on-flaky', { runtime: 'flaky' });
    const w = await bound(ns, 'on-flaky');
    assert.equal(w.status?.boundPod, pod?.metadata.name);
    const p = await podOf(ns, pod?.metadata.name ?? '');
    await createRun(
      ns,
      { runtime: 'flaky', workspace: { name: 'on-flaky' }, source: { inline: 'echo y > g' } },
      { name: 'fill' },
    );
    assert.equal((await finished(ns, 'fill')).status?.phase, 'Succeeded');
    const dir = join(volumeDir(p), 'persistent', 'on-flaky');
    assert.ok(existsSync(join(dir, 'g')));
    mkdirSync(volumeDir(p), { recursive: true });
    writeFileSync(join(volumeDir(p), 'unready'), '');
    try {
      const unready = await eventually('PodAvailable=False', async () => {
        const x = await getWs(ns, 'on-flaky');
        return cond(x, 'PodAvailable')?.status === 'False' ? x : undefined;
      });
      assert.equal(unready.status?.phase, 'Bound', 'an unready Pod keeps its binding');
      await createRun(
        ns,
        { runtime: 'flaky', workspace: { name: 'on-flaky' }, source: { inline: 'true' } },
        { name: 'waits' },
      );
      const waiting = await eventually('a waiting message', async () => {
        const r = await getRun(ns, 'waits');
        return r.status?.message ? r : undefined;
      });
      assert.equal(waiting.status?.phase, 'Pending');
      assert.match(waiting.status?.message ?? '', /PersistentWorkspace "on-flaky"/);
      await admin().delete(`${GROUP}/namespaces/${ns}/runs/waits`);
      await admin().delete(wsPath(ns, 'on-flaky'));
      await gone(wsPath(ns, 'on-flaky'), 'workspace on-flaky');
      assert.ok(!existsSync(dir), 'runtimed on the bound (unready) Pod deleted the directory');
      assert.ok(existsSync(join(volumeDir(p), 'unready')), 'and nothing else');
      assert.equal((await podOf(ns, p.metadata.name ?? '')).metadata.uid, p.metadata.uid, 'on the same Pod');
      assert.deepEqual(
        (seen.get('on-flaky') ?? []).filter(([phase]) => phase === 'Lost'),
        [],
        'never Lost: the Pod stayed',
      );
    } finally {
      rmSync(join(volumeDir(p), 'unready'), { force: true });
    }
  });
});
