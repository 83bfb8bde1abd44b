/**
 * Runs on warm Runtime Pods, on the real local cluster with the kruntimes install: upstream
 * Runtime manifests, bash and python Runs with outputs, failures, output limits, timeout,
 * cancellation, retries, capacity and FIFO drain, affinity, runtimed restart and Pod loss.
 */
import assert from 'node:assert/strict';
import { isApiError } from '../lib/kube/errors.ts';
import { ListWatch } from '../lib/kube/watch.ts';
import { KubeClient } from '../lib/kube/client.ts';
import { cluster } from './cluster.ts';
import { admin, deleteNamespace, eventually, newNamespace, pkiFile, servingCert } from './helpers.ts';
import { startGitServer, type GitServer } from './git-server.ts';
import {
  GROUP,
  bashRuntime,
  cond,
  createRun,
  createRuntime,
  example,
  finished,
  getRun,
  phase,
  PER_NODE,
  runEvent,
  runtimedPid,
  runtimePods,
  type RunObj,
} from './runs-helpers.ts';

describe('Runs on warm Runtime Pods', function () {
  let ns: string;
  before(async () => {
    ns = await newNamespace('runs');
    for (const f of ['examples/runtimes/bash.yaml', 'examples/runtimes/python.yaml']) {
      await admin().create(`${GROUP}/namespaces/${ns}/runtimes`, example(f));
    }
    await runtimePods(ns, 'bash', PER_NODE);
    await runtimePods(ns, 'python', PER_NODE);
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it('upstream-style Runtime manifests become ready DaemonSets of Runtime Pods', async () => {
    const rt = await eventually('Runtime bash Ready', async () => {
      const r = await admin().get<RunObj>(`${GROUP}/namespaces/${ns}/runtimes/bash`);
      return (r.status as { readyReplicas?: number } | undefined)?.readyReplicas === PER_NODE ? r : undefined;
    });
    assert.equal(cond(rt, 'Ready')?.status, 'True');
    const ds = await admin().get<RunObj>(`/apis/apps/v1/namespaces/${ns}/daemonsets/runtime-bash`);
    const tpl = ds.spec.template as {
      metadata: { annotations: Record<string, string> };
      spec: { containers: { name: string }[] };
    };
    assert.deepEqual(
      tpl.spec.containers.map((c) => c.name),
      ['runtime', 'runtimed'],
    );
    assert.equal(tpl.metadata.annotations['kruntimes.io/capacity.runs'], '8');
  });

  it('runs a bash Run and a python Run with inline source and outputs', async () => {
    await createRun(
      ns,
      { runtime: 'bash', source: { inline: 'echo "sum=$((20 + 22))" >> "$KRUNTIME_OUTPUTS"\necho done' } },
      { name: 'bash-ok' },
    );
    await createRun(
      ns,
      {
        runtime: 'python',
        source: { inline: 'import os\nopen(os.environ["KRUNTIME_OUTPUTS"], "a").write("lang=python\\n")\nprint("hi")' },
      },
      { name: 'py-ok' },
    );
    const b = await finished(ns, 'bash-ok');
    const p = await finished(ns, 'py-ok');
    assert.equal(b.status?.phase, 'Succeeded', b.status?.message);
    assert.deepEqual(b.status?.outputs, { sum: '42' });
    assert.equal(b.status?.message, 'execution completed');
    assert.equal(cond(b, 'Completed')?.reason, 'RunCompleted');
    assert.ok(b.status?.startTime && b.status.completionTime && b.status.attempt === 1);
    assert.equal(p.status?.phase, 'Succeeded', p.status?.message);
    assert.deepEqual(p.status?.outputs, { lang: 'python' });
  });

  it('reports a failing script as Failed/RuntimeError with its exit status and stderr', async () => {
    await createRun(ns, { runtime: 'bash', source: { inline: 'echo boom >&2\nexit 3' } }, { name: 'fails' });
    const r = await finished(ns, 'fails');
    assert.equal(r.status?.phase, 'Failed');
    assert.equal(cond(r, 'Completed')?.reason, 'RuntimeError');
    assert.match(r.status?.message ?? '', /exit status 3/);
    const ev = await runEvent(ns, 'fails', 'RuntimeError');
    assert.equal(ev.type, 'Warning');
    assert.match(ev.message, /exit status 3/);
  });

  it('fails oversized or malformed outputs without retrying', async () => {
    await createRun(
      ns,
      {
        runtime: 'bash',
        source: { inline: 'for i in $(seq 1 65); do echo "k$i=v" >> "$KRUNTIME_OUTPUTS"; done' },
        retryPolicy: { maxAttempts: 3, backoff: '100ms' },
      },
      { name: 'too-many' },
    );
    await createRun(
      ns,
      { runtime: 'bash', source: { inline: 'echo "no equals sign" >> "$KRUNTIME_OUTPUTS"' } },
      { name: 'malformed' },
    );
    const big = await finished(ns, 'too-many');
    assert.equal(big.status?.phase, 'Failed');
    assert.equal(cond(big, 'Completed')?.reason, 'OutputsTooLarge');
    assert.equal(big.status?.attempt, 1, 'no retry for output violations');
    const bad = await finished(ns, 'malformed');
    assert.equal(cond(bad, 'Completed')?.reason, 'OutputsInvalid');
    assert.match(bad.status?.message ?? '', /line 1/);
  });

  it('times a Run out', async () => {
    await createRun(ns, { runtime: 'bash', source: { inline: 'sleep 30' }, timeout: '1s' }, { name: 'slow' });
    const r = await finished(ns, 'slow', 30_000);
    assert.equal(r.status?.phase, 'Timeout');
    assert.equal(r.status?.message, 'timeout after 1s');
  });

  it('cancels a pending Run and a running Run', async () => {
    await createRun(ns, { runtime: 'nowhere', source: { inline: 'true' } }, { name: 'pending-cancel' });
    const waiting = await eventually('a waiting message', async () => {
      const r = await getRun(ns, 'pending-cancel');
      return r.status?.message ? r : undefined;
    });
    assert.equal(waiting.status?.phase, 'Pending');
    assert.match(waiting.status?.message ?? '', /waiting for available runtime pods for runtime "nowhere"/);
    await admin().patch(`${GROUP}/namespaces/${ns}/runs/pending-cancel`, { spec: { cancelRequested: true } });
    assert.equal((await finished(ns, 'pending-cancel')).status?.phase, 'Cancelled');

    await createRun(ns, { runtime: 'bash', source: { inline: 'sleep 60' } }, { name: 'running-cancel' });
    await phase(ns, 'running-cancel', 'Running');
    await admin().patch(`${GROUP}/namespaces/${ns}/runs/running-cancel`, { spec: { cancelRequested: true } });
    const r = await finished(ns, 'running-cancel', 20_000);
    assert.equal(r.status?.phase, 'Cancelled');
    assert.equal(r.status?.message, 'cancelled by user');
  });

  it('retries in place with backoff until an attempt succeeds', async () => {
    const script =
      'n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; echo "attempt=$n" >> "$KRUNTIME_OUTPUTS"; [ $n -ge 3 ]';
    await createRun(
      ns,
      { runtime: 'bash', source: { inline: script }, retryPolicy: { maxAttempts: 3, backoff: '200ms' } },
      { name: 'flaky' },
    );
    const r = await finished(ns, 'flaky', 30_000);
    assert.equal(r.status?.phase, 'Succeeded', r.status?.message);
    assert.equal(r.status?.attempt, 3);
    assert.deepEqual(r.status?.outputs, { attempt: '3' });
    assert.match((await runEvent(ns, 'flaky', 'RuntimeError')).message, /attempt \d failed: .*; retrying/);
  });

  it('deletes a finished Run after ttlSecondsAfterFinished', async () => {
    await createRun(
      ns,
      { runtime: 'bash', source: { inline: 'true' }, ttlSecondsAfterFinished: 1 },
      { name: 'short-lived' },
    );
    await finished(ns, 'short-lived');
    await eventually(
      'the Run to be deleted by run-ttl',
      async () => {
        try {
          await getRun(ns, 'short-lived');
          return false;
        } catch (e) {
          return isApiError(e, 404);
        }
      },
      20_000,
    );
  });

  it('rejects invalid resource requests with InvalidResources', async () => {
    await createRun(
      ns,
      { runtime: 'bash', source: { inline: 'true' }, resources: { requests: { runs: '1500m' } } },
      { name: 'bad-resources' },
    );
    const r = await finished(ns, 'bad-resources');
    assert.equal(r.status?.phase, 'Failed');
    assert.match(r.status?.message ?? '', /runs/);
    const ev = await runEvent(ns, 'bad-resources', 'InvalidResources');
    assert.equal(ev.source?.component, 'kruntimes-scheduler');
  });
});

describe('Run capacity, FIFO drain and affinity', function () {
  let ns: string;
  before(async () => {
    ns = await newNamespace('cap');
    await createRuntime(ns, 'small', bashRuntime({ replicas: 1, capacity: { resources: { runs: '2' } } }));
    await createRuntime(ns, 'pair', bashRuntime({ replicas: 2, capacity: { resources: { runs: '4' } } }));
    await runtimePods(ns, 'small', 1);
    await runtimePods(ns, 'pair', 2);
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it('never runs more than the capacity and drains the backlog in creation order', async () => {
    let running = 0;
    let maxRunning = 0;
    const startOrder: string[] = [];
    const watch = new ListWatch<RunObj>(
      admin(),
      { path: `${GROUP}/namespaces/${ns}/runs`, labelSelector: 'batch=drain' },
      (d) => {
        const was = d.old?.status?.phase;
        const now = d.object.status?.phase;
        const active = (p?: string): boolean => p === 'Scheduled' || p === 'Running';
        if (!active(was) && active(now)) {
          running++;
          maxRunning = Math.max(maxRunning, running);
          startOrder.push(d.object.metadata.name ?? '');
        }
        if (active(was) && !active(now)) running--;
      },
    );
    watch.start();
    await watch.synced;
    for (let i = 0; i < 6; i++)
      await createRun(
        ns,
        { runtime: 'small', source: { inline: 'sleep 0.6' } },
        { name: `drain-${i}`, labels: { batch: 'drain' } },
      );
    const waiting = await eventually('a Run waiting for capacity', async () => {
      const r = await getRun(ns, 'drain-5');
      return r.status?.phase === 'Pending' && r.status.message ? r : undefined;
    });
    assert.match(waiting.status?.message ?? '', /capacity/);
    const unschedulable = await runEvent(ns, 'drain-5', 'FailedScheduling');
    assert.equal(unschedulable.type, 'Warning');
    assert.match(unschedulable.message, /capacity/);
    for (let i = 0; i < 6; i++) assert.equal((await finished(ns, `drain-${i}`, 30_000)).status?.phase, 'Succeeded');
    watch.stop();
    assert.equal(maxRunning, 2, 'capacity 2 is never exceeded');
    assert.deepEqual(startOrder, ['drain-0', 'drain-1', 'drain-2', 'drain-3', 'drain-4', 'drain-5']);
  });

  it('required affinity co-locates and anti-affinity spreads', async () => {
    const term = (app: string): Record<string, unknown> => ({
      labelSelector: { matchLabels: { app } },
      topologyKey: 'kruntimes.io/runtime-pod',
    });
    await createRun(
      ns,
      { runtime: 'pair', source: { inline: 'sleep 3' } },
      { name: 'anchor', labels: { app: 'anchor' } },
    );
    const anchor = await phase(ns, 'anchor', 'Running');
    await createRun(
      ns,
      {
        runtime: 'pair',
        source: { inline: 'true' },
        affinity: { runAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [term('anchor')] } },
      },
      { name: 'with-anchor' },
    );
    await createRun(
      ns,
      {
        runtime: 'pair',
        source: { inline: 'true' },
        affinity: { runAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [term('anchor')] } },
      },
      { name: 'away-from-anchor' },
    );
    const w = await finished(ns, 'with-anchor');
    const a = await finished(ns, 'away-from-anchor');
    assert.equal(w.status?.assignedPod, anchor.status?.assignedPod);
    assert.notEqual(a.status?.assignedPod, anchor.status?.assignedPod);
  });
});

describe('runtimed restart and Runtime Pod loss', function () {
  let ns: string;
  before(async () => {
    ns = await newNamespace('loss');
    await createRuntime(ns, 'dur', bashRuntime({ replicas: 2, capacity: { resources: { runs: '4' } } }));
    await runtimePods(ns, 'dur', 2);
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it('finishes a Run correctly when runtimed is killed while it runs', async () => {
    await createRun(
      ns,
      { runtime: 'dur', source: { inline: 'sleep 2; echo "survived=yes" >> "$KRUNTIME_OUTPUTS"' } },
      { name: 'survivor' },
    );
    const r = await phase(ns, 'survivor', 'Running');
    process.kill(await runtimedPid(ns, r.status?.assignedPod ?? ''), 'SIGKILL');
    const done = await finished(ns, 'survivor', 60_000);
    assert.equal(done.status?.phase, 'Succeeded', done.status?.message);
    assert.deepEqual(done.status?.outputs, { survived: 'yes' });
  });

  it('fails a Run with PodGone when its Runtime Pod is deleted, or retries it elsewhere per policy', async () => {
    await createRun(ns, { runtime: 'dur', source: { inline: 'sleep 30' } }, { name: 'orphan' });
    await createRun(
      ns,
      {
        runtime: 'dur',
        source: { inline: 'n=$(cat /workspace/attempt 2>/dev/null || echo 0); sleep 2; echo ok' },
        retryPolicy: { maxAttempts: 2, backoff: '100ms', retryableReasons: ['PodGone'] },
      },
      { name: 'mover' },
    );
    const o = await phase(ns, 'orphan', 'Running');
    const m = await phase(ns, 'mover', 'Running');
    const pods = new Set([o.status?.assignedPod, m.status?.assignedPod]);
    for (const p of pods)
      await admin()
        .delete(`/api/v1/namespaces/${ns}/pods/${p}`, { gracePeriodSeconds: 0 })
        .catch((e: unknown) => {
          if (!isApiError(e, 404)) throw e;
        });
    const orphan = await finished(ns, 'orphan', 90_000);
    assert.equal(orphan.status?.phase, 'Failed');
    assert.equal(cond(orphan, 'Completed')?.reason, 'PodGone');
    assert.equal((await runEvent(ns, 'orphan', 'PodGone')).source?.component, 'kruntimes-reaper');
    assert.match((await runEvent(ns, 'mover', 'PodGone')).message, /retrying \(attempt 2\)/);
    const mover = await finished(ns, 'mover', 90_000);
    assert.equal(mover.status?.phase, 'Succeeded', mover.status?.message);
    assert.equal(mover.status?.attempt, 2);
    assert.ok(!pods.has(mover.status?.assignedPod), 'retried on a replacement Pod');
  });

  it('leaves a Run to PodGone when its Runtime Pod is deleted gracefully (its Runtime Server stops under it)', async () => {
    // Both containers get SIGTERM: the Runtime Server kills its executions on the way out while
    // runtimed still runs. That is the Pod's loss, not a failure runtimed may report (it reported
    // Fenced before, and no retry for PodGone applied).
    await createRun(ns, { runtime: 'dur', source: { inline: 'sleep 30' } }, { name: 'graceful' });
    const g = await phase(ns, 'graceful', 'Running');
    await admin().delete(`/api/v1/namespaces/${ns}/pods/${g.status?.assignedPod}`, { gracePeriodSeconds: 10 });
    const done = await finished(ns, 'graceful', 90_000);
    assert.equal(done.status?.phase, 'Failed');
    assert.equal(cond(done, 'Completed')?.reason, 'PodGone', cond(done, 'Completed')?.message);
  });
});

describe("runtimed may write only its own Pod's Runs", function () {
  let ns: string;
  before(async () => {
    ns = await newNamespace('own');
    await createRuntime(ns, 'two', bashRuntime({ replicas: 2, capacity: { resources: { runs: '4' } } }));
    await runtimePods(ns, 'two', 2);
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it('a runtimed token bound to one Pod cannot write a Run assigned to another Pod', async () => {
    const [podA, podB] = await runtimePods(ns, 'two', 2);
    assert.ok(podA && podB);
    const tok = await admin().create<RunObj & { status: { token: string } }>(
      `/api/v1/namespaces/${ns}/serviceaccounts/kruntimes-runtimed/token`,
      {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: {
          expirationSeconds: 600,
          boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: podA.metadata.name, uid: podA.metadata.uid },
        },
      },
    );
    const asA = new KubeClient({ server: cluster().server, ca: pkiFile('ca.crt'), token: tok.status.token });
    const runs = await Promise.all(
      [0, 1, 2, 3].map((i) =>
        createRun(ns, { runtime: 'two', source: { inline: 'sleep 20' } }, { name: `target-${i}` }),
      ),
    );
    const placed = await Promise.all(runs.map((r) => phase(ns, r.metadata.name ?? '', 'Running')));
    const onB = placed.find((r) => r.status?.assignedPod === podB.metadata.name);
    const onA = placed.find((r) => r.status?.assignedPod === podA.metadata.name);
    assert.ok(onA && onB, 'least-loaded scoring spreads Runs over both Pods');
    await assert.rejects(
      asA.patch(`${GROUP}/namespaces/${ns}/runs/${onB.metadata.name}/status`, { status: { message: 'hijacked' } }),
      (e: unknown) => isApiError(e, 403) && /may only write Runs assigned to its own Pod/.test(e.message),
    );
    await asA.patch(`${GROUP}/namespaces/${ns}/runs/${onA.metadata.name}/status`, { status: { message: 'own run' } });
    await assert.rejects(
      asA.patch(
        `/api/v1/namespaces/${ns}/pods/${podB.metadata.name}/status`,
        { status: { conditions: [] } },
        'application/strategic-merge-patch+json',
      ),
      (e: unknown) => isApiError(e, 403) && /only update the status of its own Pod/.test(e.message),
    );
    asA.close();
  });
});

describe('git-source Runs', function () {
  let ns: string;
  let git: GitServer;
  before(async () => {
    ns = await newNamespace('git');
    git = await startGitServer(
      {
        'build.sh':
          '#!/bin/bash\necho "built from git: $1"\necho "commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)" >> "$KRUNTIME_OUTPUTS"\n',
      },
      servingCert(`git-${ns}`, ['git.local']),
    );
    await createRuntime(
      ns,
      'bash',
      bashRuntime({
        template: {
          spec: {
            containers: [
              {
                name: 'runtime',
                image: 'ghcr.io/kruntimes/bash-runtime:v0.0.3',
                env: [{ name: 'GIT_SSL_CAINFO', value: '/var/run/secrets/kubernetes.io/serviceaccount/ca.crt' }],
              },
            ],
          },
        },
      }),
    );
    await runtimePods(ns, 'bash', PER_NODE);
  });
  after(async () => {
    git.close();
    await deleteNamespace(ns);
  });

  it('fetches the commit over https and runs its entrypoint with args', async () => {
    await createRun(
      ns,
      {
        runtime: 'bash',
        source: { repoURL: git.url, commitSHA: git.commit },
        mode: { task: { entrypoint: 'build.sh', args: ['release'] } },
      },
      { name: 'from-git' },
    );
    const r = await finished(ns, 'from-git', 60_000);
    assert.equal(r.status?.phase, 'Succeeded', r.status?.message);
    assert.deepEqual(r.status?.outputs, { commit: git.commit });
  });

  it('fails clearly for a disallowed URL scheme and an unreachable commit', async () => {
    await createRun(
      ns,
      { runtime: 'bash', source: { repoURL: git.url.replace('https://', 'http://') } },
      { name: 'plain-http' },
    );
    await createRun(
      ns,
      { runtime: 'bash', source: { repoURL: git.url, commitSHA: '0123456789abcdef0123456789abcdef01234567' } },
      { name: 'bad-commit' },
    );
    const h = await finished(ns, 'plain-http');
    assert.equal(cond(h, 'Completed')?.reason, 'PrepareSource');
    assert.match(h.status?.message ?? '', /is not allowed: use https:\/\/, ssh:\/\/ or git@host:path/);
    const c = await finished(ns, 'bad-commit', 60_000);
    assert.equal(cond(c, 'Completed')?.reason, 'PrepareSource');
    assert.match(c.status?.message ?? '', /prepare source: git fetch/);
  });
});
