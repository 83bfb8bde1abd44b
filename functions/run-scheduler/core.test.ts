import assert from 'node:assert/strict';
import { planBatch, podCapacity, type Plan, type PlanInput, type RunView, type RuntimePod } from './core.ts';
import { activeRun, capacityAnnotations, NOW, pod, run, term, workspaces, ws } from './testing.ts';

function plan(over: Partial<PlanInput>): Plan {
  return planBatch({ runtime: 'bash', pending: [], active: [], pods: [], workspaces: new Map(), now: NOW, ...over });
}

/** Compact view: run name → pod name, or reason. */
function summary(p: Plan): Record<string, string> {
  const out: Record<string, string> = {};
  for (const b of p.bind) out[b.run.name] = b.pod.name;
  for (const w of p.wait) out[w.run.name] = w.reason;
  for (const f of p.fail) out[f.run.name] = `fail:${f.reason}`;
  return out;
}

const messageOf = (p: Plan, name: string): string | undefined =>
  [...p.wait, ...p.fail].find((x) => x.run.name === name)?.message;

describe('run-scheduler planBatch', () => {
  it('binds a Run to an available Runtime Pod', () => {
    const p = plan({ pending: [run('a')], pods: [pod('p1')] });
    assert.deepEqual(summary(p), { a: 'p1' });
    assert.equal(p.bind[0]?.pod.uid, 'uid-p1');
  });

  it('waits with the upstream message when no Runtime Pod is available', () => {
    const p = plan({ pending: [run('a')] });
    assert.deepEqual(p.wait, [
      {
        run: p.wait[0]?.run,
        reason: 'NoRuntimePods',
        message: 'waiting for available runtime pods for runtime "bash"',
      },
    ]);
    const unavailable: RuntimePod[] = [
      pod('pending', { phase: 'Pending' }),
      pod('deleting', { deleting: true }),
      pod('unready', { podReady: false }),
      pod('runtimed-false', { runtimedReady: { status: 'False', lastProbeTime: NOW.toISOString() } }),
      pod('no-heartbeat', { runtimedReady: undefined }),
      pod('no-probe-time', { runtimedReady: { status: 'True' } }),
      pod('stale', { runtimedReady: { status: 'True', lastProbeTime: '2026-07-06T11:59:44.999Z' } }),
    ];
    assert.deepEqual(summary(plan({ pending: [run('a')], pods: unavailable })), { a: 'NoRuntimePods' });
  });

  it('treats a heartbeat exactly heartbeatStaleMs old as fresh, and honours a custom bound', () => {
    const edge = pod('edge', { runtimedReady: { status: 'True', lastProbeTime: '2026-07-06T11:59:45Z' } });
    assert.deepEqual(summary(plan({ pending: [run('a')], pods: [edge] })), { a: 'edge' });
    assert.deepEqual(summary(plan({ pending: [run('a')], pods: [edge], heartbeatStaleMs: 14_999 })), {
      a: 'NoRuntimePods',
    });
    assert.deepEqual(
      summary(plan({ pending: [run('a')], pods: [edge], heartbeatStaleMs: 0 })),
      { a: 'edge' },
      'non-positive → default 15 s',
    );
    const future = pod('future', { runtimedReady: { status: 'True', lastProbeTime: '2026-07-06T12:00:05Z' } });
    assert.deepEqual(
      summary(plan({ pending: [run('a')], pods: [future] })),
      { a: 'future' },
      'clock skew: a future probe is fresh',
    );
  });

  it('never over-commits within a batch and counts active Runs', () => {
    const p = plan({ pending: [run('a'), run('b'), run('c')], pods: [pod('p1')] });
    assert.deepEqual(summary(p), { a: 'p1', b: 'p1', c: 'InsufficientCapacity' });
    assert.equal(
      messageOf(p, 'c'),
      'waiting for runtime capacity for runtime "bash": requested runs=1, no ready pod has enough free capacity',
    );
    const withActive = plan({
      pending: [run('a'), run('b')],
      pods: [pod('p1')],
      active: [
        activeRun('x', 'p1'),
        activeRun('dup', 'p1', { uid: 'uid-x' }),
        activeRun('done', 'p1', { phase: 'Succeeded' }),
        activeRun('unassigned', '', { phase: 'Scheduled' }),
        activeRun('invalid', 'p1', { requests: { runs: '-1' } }),
      ],
    });
    assert.deepEqual(
      summary(withActive),
      { a: 'p1', b: 'InsufficientCapacity' },
      'only x counts (duplicates, terminal, unassigned and invalid Runs do not)',
    );
  });

  it('requires every requested resource to be advertised with room', () => {
    const gpu = pod('gpu', { annotations: capacityAnnotations({ runs: '4', 'example.com/gpu': '2' }) });
    const p = plan({
      pending: [
        run('a', { requests: { 'example.com/gpu': '2' } }),
        run('b', { requests: { 'example.com/gpu': '1' } }),
        run('c', { requests: { 'example.com/tpu': '1' } }),
      ],
      pods: [gpu, pod('plain')],
    });
    assert.deepEqual(summary(p), { a: 'gpu', b: 'InsufficientCapacity', c: 'InsufficientCapacity' });
    assert.equal(
      messageOf(p, 'b'),
      'waiting for runtime capacity for runtime "bash": requested example.com/gpu=1, runs=1, no ready pod has enough free capacity',
    );
    assert.deepEqual(podCapacity(gpu.annotations), { 'example.com/gpu': 2n, runs: 4n });
  });

  it('fails Runs with invalid requests or uncompilable affinity without consuming capacity', () => {
    const p = plan({
      pending: [
        run('bad', { requests: { runs: '1.5' } }),
        run('topo', {
          affinity: {
            runAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: [
                {
                  labelSelector: { matchLabels: { a: 'b' } },
                  topologyKey: 'example.com/rack' as 'kubernetes.io/hostname',
                },
              ],
            },
          },
        }),
        run('a'),
        run('b'),
      ],
      pods: [pod('p1')],
    });
    assert.deepEqual(summary(p), { bad: 'fail:InvalidResources', topo: 'fail:InvalidAffinity', a: 'p1', b: 'p1' });
    assert.equal(messageOf(p, 'bad'), 'resource request "runs" must be a non-negative integer');
    assert.equal(
      messageOf(p, 'topo'),
      'pod selection failed: unsupported run affinity topology key "example.com/rack"',
    );
  });

  it('plans in FIFO order (creationTimestamp, then name) whatever the input order', () => {
    const pending = [run('late', { t: 30 }), run('b', { t: 10 }), run('a', { t: 10 })];
    const p = plan({ pending, pods: [pod('p1')] });
    assert.deepEqual(summary(p), { a: 'p1', b: 'p1', late: 'InsufficientCapacity' });
    assert.deepEqual(
      p.bind.map((x) => x.run.name),
      ['a', 'b'],
    );
  });

  it('does not block smaller later Runs behind a larger waiting one (no head-of-line blocking, as upstream)', () => {
    const p = plan({
      pending: [run('big', { requests: { runs: '2' } }), run('small')],
      pods: [pod('p1')],
      active: [activeRun('x', 'p1')],
    });
    assert.deepEqual(summary(p), { big: 'InsufficientCapacity', small: 'p1' });
  });

  it('spreads by LeastLoaded and breaks ties by Pod name', () => {
    assert.deepEqual(summary(plan({ pending: [run('a'), run('b')], pods: [pod('p2'), pod('p1')] })), {
      a: 'p1',
      b: 'p2',
    });
    const cap = capacityAnnotations({ runs: '4', 'example.com/accelerator': '16' });
    const used = (name: string, podName: string, acc: string): RunView =>
      activeRun(name, podName, { requests: { 'example.com/accelerator': acc } });
    const p = plan({
      pending: [run('r', { requests: { 'example.com/accelerator': '1' } })],
      pods: [
        pod('pod-a', { annotations: cap }),
        pod('pod-b', { annotations: cap }),
        pod('pod-c', { annotations: cap }),
      ],
      active: [used('x', 'pod-a', '8'), used('y', 'pod-b', '1')],
    });
    assert.deepEqual(summary(p), { r: 'pod-c' }, 'upstream TestLeastLoadedScoreRanksCompleteResourceUtilization');
  });

  it('ranks by dominant utilization, then by the sum of utilizations', () => {
    const cap = capacityAnnotations({ runs: '10', mem: '10' });
    const p = plan({
      pending: [run('r', { requests: { mem: '1' } })],
      pods: [pod('a', { annotations: cap }), pod('b', { annotations: cap })],
      active: [
        activeRun('x', 'a', { requests: { mem: '4' } }),
        activeRun('y', 'b', { requests: { runs: '4', mem: '3' } }),
      ],
    });
    // a: runs 2/10, mem 5/10 → max 1/2; b: runs 5/10, mem 4/10 → max 1/2; sums 7/10 < 9/10 → a.
    assert.deepEqual(summary(p), { r: 'a' });
  });

  it('adds PreferredRunAffinity to LeastLoaded', () => {
    const pods = [
      pod('p1', { annotations: capacityAnnotations({ runs: '4' }) }),
      pod('p2', { annotations: capacityAnnotations({ runs: '4' }) }),
    ];
    const active = [activeRun('x', 'p2', { labels: { app: 'cache' } })];
    const prefer = run('r', {
      affinity: {
        runAffinity: {
          preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 1, runAffinityTerm: term({ app: 'cache' }) }],
        },
      },
    });
    // p1: LeastLoaded 100 + preferred 0; p2: LeastLoaded 0 + preferred 100 → tie → name.
    assert.deepEqual(summary(plan({ pending: [prefer], pods, active })), { r: 'p1' });
    const active2 = [...active, activeRun('y', 'p1')];
    // p1 now carries 1 Run as well: LeastLoaded ties at 100/100, preferred decides.
    assert.deepEqual(summary(plan({ pending: [prefer], pods, active: active2 })), { r: 'p2' });
    const avoid = run('r', {
      affinity: {
        runAntiAffinity: {
          preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 50, runAffinityTerm: term({ app: 'cache' }) }],
        },
      },
    });
    assert.deepEqual(summary(plan({ pending: [avoid], pods, active: active2 })), { r: 'p1' });
  });

  it('lets later Runs of the batch see earlier binds for anti-affinity', () => {
    const web = (name: string): RunView =>
      run(name, {
        labels: { app: 'web' },
        affinity: { runAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [term({ app: 'web' })] } },
      });
    const big = { annotations: capacityAnnotations({ runs: '10' }) };
    const p = plan({ pending: [web('a'), web('b'), web('c')], pods: [pod('p1', big), pod('p2', big)] });
    assert.deepEqual(summary(p), { a: 'p1', b: 'p2', c: 'UnsatisfiedRunAntiAffinity' });
    assert.equal(
      messageOf(p, 'c'),
      'waiting for available runtime pods satisfying required Run anti-affinity for runtime "bash"',
    );
  });

  it('bootstraps a self-affine cohort onto one Pod within a batch', () => {
    const build = (name: string): RunView =>
      run(name, {
        labels: { job: 'build' },
        affinity: { runAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [term({ job: 'build' })] } },
      });
    const big = { annotations: capacityAnnotations({ runs: '3' }) };
    const p = plan({
      pending: [build('a'), build('b'), build('c'), build('d')],
      pods: [pod('p1', big), pod('p2', big)],
    });
    assert.deepEqual(
      summary(p),
      { a: 'p1', b: 'p1', c: 'p1', d: 'UnsatisfiedRunAffinity' },
      'p1 full, p2 has no cohort member',
    );
    assert.equal(
      messageOf(p, 'd'),
      'waiting for available runtime pods satisfying required Run affinity for runtime "bash"',
    );
  });

  it('gives an earlier Run waiting on affinity the first chance once a later Run of the batch satisfies it', () => {
    const follow = { runAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [term({ role: 'leader' })] } };
    const pods = [pod('p1'), pod('p2', { annotations: capacityAnnotations({ runs: '3' }) })];
    const p = plan({
      pending: [
        run('f0', { t: 0, affinity: follow }),
        run('leader', { t: 1, labels: { role: 'leader' } }),
        run('f1', { t: 2, affinity: follow }),
        run('f2', { t: 3, affinity: follow }),
      ],
      pods,
      active: [activeRun('x', 'p1')],
    });
    assert.deepEqual(summary(p), { f0: 'p2', leader: 'p2', f1: 'p2', f2: 'UnsatisfiedRunAffinity' });
    assert.deepEqual(
      p.bind.map((b) => b.run.name),
      ['leader', 'f0', 'f1'],
      'bindings are listed in the order they were made',
    );
  });

  it('keeps Runs whose required affinity selects nobody else Pending', () => {
    const r = run('r', {
      labels: { job: 'test' },
      affinity: { runAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [term({ job: 'build' })] } },
    });
    assert.deepEqual(summary(plan({ pending: [r], pods: [pod('p1')] })), { r: 'UnsatisfiedRunAffinity' });
  });

  it('uses Node topology keys for affinity and anti-affinity', () => {
    const pods = [
      pod('p1', { nodeLabels: { 'kubernetes.io/hostname': 'n1', 'topology.kubernetes.io/zone': 'z1' } }),
      pod('p2', { nodeLabels: { 'kubernetes.io/hostname': 'n1', 'topology.kubernetes.io/zone': 'z1' } }),
      pod('p3', { nodeLabels: { 'kubernetes.io/hostname': 'n3', 'topology.kubernetes.io/zone': 'z2' } }),
      pod('p4', { nodeLabels: {} }),
    ];
    const active = [activeRun('db', 'p1', { labels: { app: 'db' } })];
    const near = run('near', {
      affinity: {
        runAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: [term({ app: 'db' }, 'kubernetes.io/hostname')],
        },
      },
    });
    assert.deepEqual(
      summary(plan({ pending: [near], pods, active })),
      { near: 'p2' },
      'same node as db, p2 is less loaded than p1',
    );
    const far = run('far', {
      affinity: {
        runAntiAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: [term({ app: 'db' }, 'topology.kubernetes.io/zone')],
        },
      },
    });
    const p = plan({ pending: [far], pods: pods.slice(0, 2), active });
    assert.deepEqual(summary(p), { far: 'UnsatisfiedRunAntiAffinity' });
    assert.deepEqual(
      summary(plan({ pending: [far], pods, active })),
      { far: 'p3' },
      'p3 (zone z2) and p4 (no zone) qualify; name decides',
    );
  });

  it('reports affinity rejections in preference to capacity', () => {
    const r = run('r', {
      affinity: { runAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [term({ app: 'db' })] } },
    });
    const p = plan({
      pending: [r],
      pods: [pod('p1'), pod('p2')],
      active: [activeRun('db', 'p1', { labels: { app: 'db' } }), activeRun('x', 'p1')],
    });
    assert.deepEqual(summary(p), { r: 'UnsatisfiedRunAffinity' }, 'p1 is full, p2 has no db Run');
  });

  it('fences workspace Runs to the bound Pod and UID', () => {
    const map = workspaces(ws('w', { phase: 'Bound', boundPod: 'p2', boundPodUID: 'uid-p2' }));
    const wr = (name: string): RunView => run(name, { workspace: { name: 'w' } });
    const p = plan({
      pending: [wr('a'), wr('b'), wr('c'), run('free')],
      pods: [pod('p1'), pod('p2')],
      workspaces: map,
    });
    assert.deepEqual(summary(p), { a: 'p2', b: 'p2', c: 'InsufficientCapacity', free: 'p1' });
    assert.equal(
      messageOf(p, 'c'),
      'waiting for runtime capacity for runtime "bash": requested runs=1, bound runtime pod "p2" of PersistentWorkspace "w" does not have enough free capacity',
    );
  });

  it('keeps workspace Runs Pending for every unusable workspace state', () => {
    const wr = run('r', { workspace: { name: 'w' } });
    const pods = [pod('p1'), pod('p2', { podReady: false })];
    const reason = (w?: ReturnType<typeof ws>, ps: RuntimePod[] = pods): string | undefined =>
      summary(plan({ pending: [wr], pods: ps, workspaces: w ? workspaces(w) : new Map() })).r;
    assert.equal(reason(), 'WorkspaceNotFound');
    assert.equal(reason(ws('w', { phase: 'Pending' })), 'WorkspacePending');
    assert.equal(reason(ws('w', { phase: 'Lost', boundPod: 'p1', boundPodUID: 'uid-p1' })), 'WorkspaceLost');
    assert.equal(reason(ws('w', { phase: 'Released', boundPod: 'p1', boundPodUID: 'uid-p1' })), 'WorkspaceReleased');
    assert.equal(
      reason(ws('w', { runtime: 'python', phase: 'Bound', boundPod: 'p1', boundPodUID: 'uid-p1' })),
      'WorkspaceRuntimeMismatch',
    );
    assert.equal(
      reason(ws('w', { phase: 'Bound', boundPod: 'p1', boundPodUID: 'old-uid' })),
      'WorkspacePodUIDMismatch',
    );
    assert.equal(
      reason(ws('w', { phase: 'Bound', boundPod: 'gone', boundPodUID: 'uid-gone' })),
      'WorkspacePodUnavailable',
    );
    assert.equal(reason(ws('w', { phase: 'Bound', boundPod: 'p2', boundPodUID: 'uid-p2' })), 'WorkspacePodUnavailable');
    assert.equal(reason(ws('w', { phase: 'Bound', boundPod: 'p1', boundPodUID: 'uid-p1' })), 'p1');
    const p = plan({
      pending: [wr],
      pods,
      workspaces: workspaces(ws('w', { phase: 'Bound', boundPod: 'p2', boundPodUID: 'uid-p2' })),
    });
    assert.equal(
      messageOf(p, 'r'),
      'waiting for bound runtime pod "p2" of PersistentWorkspace "w" to become available',
    );
  });

  it('applies affinity on top of workspace fencing', () => {
    const map = workspaces(ws('w', { phase: 'Bound', boundPod: 'p1', boundPodUID: 'uid-p1' }));
    const r = run('r', {
      workspace: { name: 'w' },
      affinity: { runAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [term({ app: 'db' })] } },
    });
    const p = plan({
      pending: [r],
      pods: [pod('p1'), pod('p2')],
      workspaces: map,
      active: [activeRun('db', 'p1', { labels: { app: 'db' } })],
    });
    assert.deepEqual(summary(p), { r: 'UnsatisfiedRunAntiAffinity' });
  });

  it('keeps namespaces apart: Pods, usage and affinity targets', () => {
    const other = pod('p1', { namespace: 'other', uid: 'uid-other-p1' });
    const p = plan({
      pending: [
        run('a', {
          namespace: 'other',
          labels: { app: 'web' },
          affinity: { runAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [term({ app: 'web' })] } },
        }),
        run('b'),
      ],
      pods: [pod('p1'), other],
      active: [activeRun('x', 'p1', { labels: { app: 'web' } }), activeRun('y', 'p1')],
    });
    assert.deepEqual(summary(p), { a: 'p1', b: 'InsufficientCapacity' });
    assert.equal(p.bind[0]?.pod.uid, 'uid-other-p1', 'a went to its own namespace, unaffected by ns/x and ns/y');
  });

  it('returns every pending Run exactly once and is independent of input order', () => {
    const pending = [run('a'), run('b', { requests: { runs: '-2' } }), run('c'), run('d')];
    const pods = [pod('p1'), pod('p2', { annotations: capacityAnnotations({ runs: '1' }) })];
    const p1 = plan({ pending, pods });
    const p2 = plan({ pending: [...pending].reverse(), pods: [...pods].reverse() });
    assert.deepEqual(summary(p1), summary(p2));
    assert.deepEqual(
      summary(p1),
      { a: 'p1', b: 'fail:InvalidResources', c: 'p1', d: 'p2' },
      'c: both Pods would be full (2/2 vs 1/1), name decides',
    );
    assert.equal(p1.bind.length + p1.wait.length + p1.fail.length, pending.length);
  });
});
