/**
 * Property tests of planBatch against a small independent reference model of the filters
 * (availability, capacity, affinity, workspace fencing), replayed in FIFO order.
 */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  fifoCompare,
  matchesSelector,
  planBatch,
  TOPOLOGY_KEYS,
  type Plan,
  type PlanInput,
  type RunAffinity,
  type RunAffinityTerm,
  type RunView,
  type RuntimePod,
  type WorkspaceView,
} from './core.ts';
import { add, cmp, rat, ZERO, type Rat } from '../../lib/kube/quantity.ts';
import { capacityAnnotations, NOW } from './testing.ts';

// ---------------------------------------------------------------------------------------
// Generators

const POD_NAMES = ['p0', 'p1', 'p2', 'p3', 'p4'];
const NAMESPACES = ['ns', 'ns', 'ns', 'ns2'];
const labelSet = fc.dictionary(fc.constantFrom('app', 'job'), fc.constantFrom('a', 'b'), {
  maxKeys: 2,
  noNullPrototype: true,
});

const selector = fc.oneof(
  fc
    .dictionary(fc.constantFrom('app', 'job'), fc.constantFrom('a', 'b'), {
      minKeys: 1,
      maxKeys: 2,
      noNullPrototype: true,
    })
    .map((matchLabels) => ({ matchLabels })),
  fc
    .array(
      fc.oneof(
        fc.record({
          key: fc.constantFrom('app', 'job'),
          operator: fc.constantFrom('In' as const, 'NotIn' as const),
          values: fc.uniqueArray(fc.constantFrom('a', 'b'), { minLength: 1 }),
        }),
        fc.record({
          key: fc.constantFrom('app', 'job'),
          operator: fc.constantFrom('Exists' as const, 'DoesNotExist' as const),
        }),
      ),
      { minLength: 1, maxLength: 2 },
    )
    .map((matchExpressions) => ({ matchExpressions })),
);
const term: fc.Arbitrary<RunAffinityTerm> = fc.record({
  labelSelector: selector,
  topologyKey: fc.constantFrom(...TOPOLOGY_KEYS),
});
const rules = fc.record(
  {
    requiredDuringSchedulingIgnoredDuringExecution: fc.array(term, { maxLength: 2 }),
    preferredDuringSchedulingIgnoredDuringExecution: fc.array(
      fc.record({ weight: fc.integer({ min: 1, max: 100 }), runAffinityTerm: term }),
      { maxLength: 2 },
    ),
  },
  { requiredKeys: [] },
);
const affinity: fc.Arbitrary<RunAffinity | undefined> = fc.option(
  fc.record({ runAffinity: rules, runAntiAffinity: rules }, { requiredKeys: [] }),
  { nil: undefined, freq: 2 },
);

const quantity = fc.oneof(
  { weight: 30, arbitrary: fc.integer({ min: 0, max: 2 }).map(String) },
  { weight: 1, arbitrary: fc.constantFrom('-1', '0.5', 'x') },
);
const requests = fc.record({ runs: quantity, gpu: quantity }, { requiredKeys: [] }) as fc.Arbitrary<
  Record<string, string>
>;

interface Template {
  requests: Record<string, string>;
  labels: Record<string, string>;
  affinity: RunAffinity | undefined;
  workspace: string | undefined;
}
const template: fc.Arbitrary<Template> = fc.record({
  requests,
  labels: labelSet,
  affinity,
  workspace: fc.oneof(
    { weight: 3, arbitrary: fc.constant(undefined) },
    { weight: 2, arbitrary: fc.constantFrom('w0', 'w1', 'w1', 'w2') },
  ),
});

const heartbeat = fc.oneof(
  { weight: 15, arbitrary: fc.constant({ status: 'True', lastProbeTime: '2026-07-06T11:59:50Z' }) },
  { weight: 1, arbitrary: fc.constant({ status: 'True', lastProbeTime: '2026-07-06T11:59:00Z' }) },
  { weight: 1, arbitrary: fc.constant({ status: 'False', lastProbeTime: '2026-07-06T11:59:50Z' }) },
  { weight: 1, arbitrary: fc.constant(undefined) },
);
const nodeLabels = fc.record(
  {
    'kubernetes.io/hostname': fc.constantFrom('n0', 'n1', 'n2'),
    'topology.kubernetes.io/zone': fc.constantFrom('z0', 'z1'),
    'topology.kubernetes.io/region': fc.constant('r0'),
  },
  { requiredKeys: [] },
);
const podArb: fc.Arbitrary<RuntimePod> = fc
  .record({
    name: fc.constantFrom(...POD_NAMES),
    namespace: fc.constantFrom(...NAMESPACES),
    replaced: fc.boolean(),
    phase: fc.constantFrom('Running', 'Running', 'Running', 'Running', 'Running', 'Pending'),
    deletingFlag: fc.integer({ min: 0, max: 19 }),
    podReady: fc.integer({ min: 0, max: 19 }).map((n) => n > 0),
    runtimedReady: heartbeat,
    runs: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
    gpu: fc.option(fc.integer({ min: 0, max: 3 }), { nil: undefined }),
    nodeLabels: fc.option(nodeLabels, { nil: undefined, freq: 5 }),
  })
  .map((p) => ({
    name: p.name,
    uid: `uid-${p.name}${p.replaced ? '-v2' : ''}`,
    namespace: p.namespace,
    phase: p.phase,
    deleting: p.deletingFlag === 0,
    podReady: p.podReady,
    ...(p.runtimedReady ? { runtimedReady: p.runtimedReady } : {}),
    ...(p.nodeLabels ? { nodeLabels: p.nodeLabels } : {}),
    annotations: capacityAnnotations({
      ...(p.runs !== undefined ? { runs: String(p.runs) } : {}),
      ...(p.gpu !== undefined ? { gpu: String(p.gpu) } : {}),
    }),
  }));
const pods = fc.uniqueArray(podArb, { selector: (p) => `${p.namespace}/${p.name}`, minLength: 1, maxLength: 6 });

const activeArb = fc.record({
  pod: fc.constantFrom(...POD_NAMES, 'ghost'),
  namespace: fc.constantFrom(...NAMESPACES),
  phase: fc.constantFrom('Running', 'Scheduled', 'Ready', 'Succeeded', 'Pending'),
  requests,
  labels: labelSet,
});

const wsArb = (name: string): fc.Arbitrary<WorkspaceView | undefined> =>
  fc.option(
    fc
      .record({
        phase: fc.option(
          fc.constantFrom(
            'Pending' as const,
            'Bound' as const,
            'Bound' as const,
            'Bound' as const,
            'Bound' as const,
            'Bound' as const,
            'Lost' as const,
            'Released' as const,
          ),
          { nil: undefined, freq: 10 },
        ),
        runtime: fc.constantFrom('bash', 'bash', 'bash', 'bash', 'bash', 'python'),
        boundPod: fc.option(fc.constantFrom(...POD_NAMES), { nil: undefined, freq: 10 }),
        fresh: fc.integer({ min: 0, max: 9 }),
      })
      .map((w) => ({
        name,
        runtime: w.runtime,
        ...(w.phase ? { phase: w.phase } : {}),
        ...(w.boundPod
          ? { boundPod: w.boundPod, boundPodUID: w.fresh > 0 ? `uid-${w.boundPod}` : `uid-${w.boundPod}-v2` }
          : {}),
      })),
    { nil: undefined, freq: 4 },
  );

const scenario: fc.Arbitrary<PlanInput> = fc
  .record({
    templates: fc.array(template, { minLength: 1, maxLength: 3 }),
    pending: fc.array(
      fc.record({ template: fc.nat(), t: fc.integer({ min: 0, max: 4 }), namespace: fc.constantFrom(...NAMESPACES) }),
      { maxLength: 8 },
    ),
    active: fc.array(activeArb, { maxLength: 6 }),
    pods,
    w0: wsArb('w0'),
    w1: wsArb('w1'),
  })
  .map((s) => {
    const pending = s.pending.map((p, i): RunView => {
      const tpl = s.templates[p.template % s.templates.length] as Template;
      return {
        name: `r${i}`,
        namespace: p.namespace,
        uid: `uid-r${i}`,
        labels: tpl.labels,
        phase: 'Pending',
        requests: tpl.requests,
        creationTimestamp: `2026-07-06T10:00:0${p.t}Z`,
        ...(tpl.affinity ? { affinity: tpl.affinity } : {}),
        ...(tpl.workspace ? { workspace: { name: tpl.workspace } } : {}),
      };
    });
    const active = s.active.map((a, i): RunView => ({
      name: `a${i}`,
      namespace: a.namespace,
      uid: `uid-a${i}`,
      labels: a.labels,
      phase: a.phase,
      assignedPod: a.pod,
      requests: a.requests,
      creationTimestamp: '2026-07-06T09:00:00Z',
    }));
    const workspaces = new Map<string, WorkspaceView>();
    for (const w of [s.w0, s.w1]) if (w) workspaces.set(w.name, w);
    return { runtime: 'bash', pending, active, pods: s.pods, workspaces, now: NOW };
  });

/** Scenarios where w0 is Bound to one of the Pods (usually with the right UID) and most Runs use it. */
const fencedScenario: fc.Arbitrary<PlanInput> = fc
  .tuple(scenario, fc.nat(), fc.integer({ min: 0, max: 4 }))
  .map(([input, n, stale]) => {
    const target = input.pods[n % input.pods.length] as RuntimePod;
    const workspaces = new Map(input.workspaces);
    workspaces.set('w0', {
      name: 'w0',
      runtime: 'bash',
      phase: 'Bound',
      boundPod: target.name,
      boundPodUID: stale === 0 ? 'uid-stale' : target.uid,
    });
    const pending = input.pending.map((r, i) =>
      i % 3 === 2 ? r : { ...r, namespace: target.namespace, workspace: { name: 'w0' } },
    );
    return { ...input, workspaces, pending };
  });

/** Scenarios where pending Runs form cohorts with required affinity to their own label (bootstrap and follow). */
const cohortScenario: fc.Arbitrary<PlanInput> = fc
  .tuple(scenario, fc.constantFrom(...TOPOLOGY_KEYS), fc.boolean())
  .map(([input, topologyKey, anti]) => {
    const pending = input.pending.map((r, i): RunView => {
      const job = i % 2 === 0 ? 'a' : 'b';
      const t = { labelSelector: { matchLabels: { job } }, topologyKey };
      const rules = { requiredDuringSchedulingIgnoredDuringExecution: [t] };
      const affinity: RunAffinity = anti && i % 4 === 1 ? { runAntiAffinity: rules } : { runAffinity: rules };
      return { ...r, labels: { ...r.labels, job }, affinity };
    });
    return { ...input, pending };
  });

/**
 * Scenarios with followers that require affinity to a leader created between them: the first
 * follower can only be placed once the later leader is bound within the same batch.
 */
const followerScenario: fc.Arbitrary<PlanInput> = fc
  .tuple(scenario, fc.constantFrom(...TOPOLOGY_KEYS))
  .map(([input, topologyKey]) => {
    const affinity: RunAffinity = {
      runAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: [
          { labelSelector: { matchLabels: { role: 'leader' } }, topologyKey },
        ],
      },
    };
    const at = (t: number): string => `2026-07-06T10:00:0${t}Z`;
    const base = { namespace: 'ns', phase: 'Pending', requests: {} };
    const extra: RunView[] = [
      { ...base, name: 'f0', uid: 'uid-f0', labels: {}, creationTimestamp: at(0), affinity },
      { ...base, name: 'l0', uid: 'uid-l0', labels: { role: 'leader' }, creationTimestamp: at(1) },
      { ...base, name: 'f1', uid: 'uid-f1', labels: {}, creationTimestamp: at(2), affinity },
    ];
    return { ...input, pending: [...extra, ...input.pending] };
  });

const anyScenario = fc.oneof(scenario, fencedScenario, cohortScenario, followerScenario);

// ---------------------------------------------------------------------------------------
// Reference model

const STALE_MS = 15_000;
const ACTIVE = new Set(['Scheduled', 'Running', 'Ready']);

function refRequests(raw: Record<string, string>): Map<string, bigint> | undefined {
  const out = new Map<string, bigint>();
  for (const [k, v] of Object.entries(raw)) {
    if (!/^\d+$/.test(v)) return undefined;
    if (BigInt(v) > 0n) out.set(k, BigInt(v));
  }
  if (!out.has('runs')) out.set('runs', 1n);
  return out;
}

function refCapacity(p: RuntimePod): Map<string, bigint> {
  const cap = new Map<string, bigint>([['runs', 2n]]);
  for (const [k, v] of Object.entries(p.annotations))
    if (BigInt(v) > 0n) cap.set(k.replace('kruntimes.io/capacity.', ''), BigInt(v));
  return cap;
}

function refAvailable(p: RuntimePod): boolean {
  const hb = p.runtimedReady;
  return (
    p.phase === 'Running' &&
    !p.deleting &&
    p.podReady &&
    hb?.status === 'True' &&
    !!hb.lastProbeTime &&
    NOW.getTime() - Date.parse(hb.lastProbeTime) <= STALE_MS
  );
}

function refDomain(p: RuntimePod | undefined, podName: string, key: string): string | undefined {
  if (key === 'kruntimes.io/runtime-pod') return podName;
  return p?.nodeLabels?.[key];
}

interface Target {
  namespace: string;
  podName: string;
  labels: Record<string, string>;
  uid: string;
}

class Model {
  usage = new Map<string, Map<string, bigint>>();
  targets: Target[] = [];
  constructor(readonly input: PlanInput) {
    for (const a of input.active) {
      if (!ACTIVE.has(a.phase) || !a.assignedPod) continue;
      this.targets.push({ namespace: a.namespace, podName: a.assignedPod, labels: a.labels, uid: a.uid });
      const req = refRequests(a.requests);
      if (req) this.add(a.namespace, a.assignedPod, req);
    }
  }

  add(ns: string, podName: string, req: Map<string, bigint>): void {
    const u = this.usage.get(`${ns}/${podName}`) ?? new Map<string, bigint>();
    for (const [k, v] of req) u.set(k, (u.get(k) ?? 0n) + v);
    this.usage.set(`${ns}/${podName}`, u);
  }

  used(p: RuntimePod, r: string): bigint {
    return this.usage.get(`${p.namespace}/${p.name}`)?.get(r) ?? 0n;
  }

  fits(p: RuntimePod, req: Map<string, bigint>): boolean {
    const cap = refCapacity(p);
    return [...req].every(([r, v]) => cap.has(r) && this.used(p, r) + v <= (cap.get(r) ?? 0n));
  }

  podOf(ns: string, name: string): RuntimePod | undefined {
    return this.input.pods.find((p) => p.namespace === ns && p.name === name);
  }

  /** Matching targets of a term (namespace-local, not the Run itself) with their domains. */
  matching(run: RunView, t: RunAffinityTerm): (string | undefined)[] {
    return this.targets
      .filter((x) => x.namespace === run.namespace && x.uid !== run.uid && matchesSelector(t.labelSelector, x.labels))
      .map((x) => refDomain(this.podOf(x.namespace, x.podName), x.podName, t.topologyKey));
  }

  affinityOk(run: RunView, p: RuntimePod): boolean {
    for (const t of run.affinity?.runAffinity?.requiredDuringSchedulingIgnoredDuringExecution ?? []) {
      const d = refDomain(p, p.name, t.topologyKey);
      const m = this.matching(run, t);
      const bootstrap = m.length === 0 && matchesSelector(t.labelSelector, run.labels);
      if (d === undefined || !(bootstrap || m.includes(d))) return false;
    }
    return this.antiOk(run, p);
  }

  antiOk(run: RunView, p: RuntimePod): boolean {
    for (const t of run.affinity?.runAntiAffinity?.requiredDuringSchedulingIgnoredDuringExecution ?? []) {
      const d = refDomain(p, p.name, t.topologyKey);
      if (d !== undefined && this.matching(run, t).includes(d)) return false;
    }
    return true;
  }

  fenced(run: RunView, p: RuntimePod): boolean {
    if (!run.workspace) return true;
    const w = this.input.workspaces.get(run.workspace.name);
    return (
      !!w &&
      w.runtime === 'bash' &&
      w.phase === 'Bound' &&
      !!w.boundPodUID &&
      w.boundPod === p.name &&
      w.boundPodUID === p.uid
    );
  }

  feasible(run: RunView, p: RuntimePod, req: Map<string, bigint>): boolean {
    return (
      p.namespace === run.namespace &&
      refAvailable(p) &&
      this.fits(p, req) &&
      this.fenced(run, p) &&
      this.affinityOk(run, p)
    );
  }

  loadKey(p: RuntimePod, req: Map<string, bigint>): { max: Rat; sum: Rat } {
    let max = ZERO;
    let sum = ZERO;
    for (const [r, c] of refCapacity(p)) {
      const used = this.used(p, r) + (req.get(r) ?? 0n);
      if (used <= 0n) continue;
      const u = rat(used, c);
      if (cmp(u, max) > 0) max = u;
      sum = add(sum, u);
    }
    return { max, sum };
  }
}

type Decision = { kind: 'bind'; pod: RuntimePod } | { kind: 'wait'; reason: string } | { kind: 'fail'; reason: string };

function decisions(plan: Plan): Map<string, Decision> {
  const out = new Map<string, Decision>();
  for (const b of plan.bind) out.set(b.run.uid, { kind: 'bind', pod: b.pod });
  for (const w of plan.wait) out.set(w.run.uid, { kind: 'wait', reason: w.reason });
  for (const f of plan.fail) out.set(f.run.uid, { kind: 'fail', reason: f.reason });
  return out;
}

/**
 * Replays the bindings in the order they were made, calling check with the model state each
 * was decided against; returns the final state.
 */
function replay(
  input: PlanInput,
  plan: Plan,
  check: (run: RunView, pod: RuntimePod, m: Model, req: Map<string, bigint>) => void,
): Model {
  const m = new Model(input);
  for (const { run, pod } of plan.bind) {
    const req = refRequests(run.requests);
    assert.ok(req, `${run.name} bound with invalid requests`);
    check(run, pod, m, req);
    m.add(run.namespace, pod.name, req);
    m.targets.push({ namespace: run.namespace, podName: pod.name, labels: run.labels, uid: run.uid });
  }
  return m;
}

const normalized = (p: Plan): unknown => ({
  bind: p.bind.map((b) => [b.run.uid, b.pod.namespace, b.pod.uid]),
  wait: p.wait.map((w) => [w.run.uid, w.reason, w.message]),
  fail: p.fail.map((f) => [f.run.uid, f.reason, f.message]),
});

/** JSON with sorted object keys, to compare specs structurally. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object')
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  return JSON.stringify(v) ?? 'null';
}

const serialize = (input: PlanInput): string =>
  JSON.stringify(input, (_k, v: unknown) => (v instanceof Map ? [...v] : v));

function permute<T>(xs: T[], keys: number[]): T[] {
  return xs
    .map((x, i) => ({ x, k: keys[i % Math.max(1, keys.length)] ?? 0 }))
    .sort((a, b) => a.k - b.k)
    .map((e) => e.x);
}

const RUNS = { numRuns: 400 };

describe('run-scheduler planBatch properties', () => {
  it('decides every pending Run exactly once', () => {
    fc.assert(
      fc.property(anyScenario, (input) => {
        const plan = planBatch(input);
        const uids = [...plan.bind, ...plan.wait, ...plan.fail].map((x) => x.run.uid).sort();
        assert.deepEqual(uids, input.pending.map((r) => r.uid).sort());
      }),
      RUNS,
    );
  });

  it('never over-commits: usage on every Pod that received Runs stays within capacity for each requested resource', () => {
    fc.assert(
      fc.property(anyScenario, (input) => {
        const plan = planBatch(input);
        const m = replay(input, plan, () => undefined);
        const initial = new Model(input);
        for (const b of plan.bind) {
          const cap = refCapacity(b.pod);
          for (const r of (refRequests(b.run.requests) ?? new Map<string, bigint>()).keys()) {
            assert.ok(
              m.used(b.pod, r) <= (cap.get(r) ?? 0n),
              `${b.pod.name}.${r}: ${m.used(b.pod, r)} > ${cap.get(r)}`,
            );
          }
        }
        for (const p of input.pods) {
          const cap = refCapacity(p);
          for (const r of ['runs', 'gpu']) {
            if (initial.used(p, r) <= (cap.get(r) ?? 0n))
              assert.ok(m.used(p, r) <= (cap.get(r) ?? 0n), `${p.name}.${r} over-committed by the batch`);
          }
        }
      }),
      RUNS,
    );
  });

  it('is deterministic and independent of the order of pods, pending and active Runs', () => {
    fc.assert(
      fc.property(anyScenario, fc.array(fc.integer(), { minLength: 1, maxLength: 10 }), (input, keys) => {
        const snapshot = serialize(input);
        const a = planBatch(input);
        assert.equal(serialize(input), snapshot, 'input is not mutated');
        assert.deepEqual(normalized(planBatch(input)), normalized(a));
        const shuffled = {
          ...input,
          pods: permute(input.pods, keys),
          pending: permute(input.pending, keys.slice().reverse()),
          active: permute(input.active, keys),
        };
        assert.deepEqual(normalized(planBatch(shuffled)), normalized(a));
      }),
      RUNS,
    );
  });

  it('answering plain Runs from an earlier wait of their shape never changes a plan (issue 17)', () => {
    fc.assert(
      fc.property(anyScenario, (input) => {
        assert.deepEqual(normalized(planBatch(input)), normalized(planBatch(input, { memo: false })));
      }),
      RUNS,
    );
    // A backlog: every pending Run three more times (same spec, later names), so shapes repeat.
    const backlog = anyScenario.map((input) => ({
      ...input,
      pending: input.pending.flatMap((r) => [
        r,
        ...[1, 2, 3].map((k) => ({ ...r, name: `${r.name}~${k}`, uid: `${r.uid}~${k}` })),
      ]),
    }));
    fc.assert(
      fc.property(backlog, (input) => {
        assert.deepEqual(normalized(planBatch(input)), normalized(planBatch(input, { memo: false })));
      }),
      RUNS,
    );
  });

  it('is FIFO-fair: a Run never binds while an earlier identical Run waits', () => {
    const spec = (r: RunView): string =>
      canonical([r.namespace, r.requests, r.labels, r.affinity ?? null, r.workspace ?? null]);
    fc.assert(
      fc.property(anyScenario, (input) => {
        const ds = decisions(planBatch(input));
        const order = [...input.pending].sort(fifoCompare);
        order.forEach((early, i) => {
          for (const late of order.slice(i + 1)) {
            if (spec(early) !== spec(late)) continue;
            const e = ds.get(early.uid);
            const l = ds.get(late.uid);
            if (e?.kind === 'wait')
              assert.notEqual(l?.kind, 'bind', `${late.name} bound while earlier ${early.name} waits`);
            if (e?.kind === 'fail') assert.equal(l?.kind, 'fail');
          }
        });
      }),
      RUNS,
    );
  });

  it('never violates required anti-affinity and always satisfies required affinity', () => {
    fc.assert(
      fc.property(anyScenario, (input) => {
        replay(input, planBatch(input), (run, pod, m) => {
          assert.ok(m.antiOk(run, pod), `${run.name} on ${pod.name} violates anti-affinity`);
          assert.ok(m.affinityOk(run, pod), `${run.name} on ${pod.name} violates affinity`);
        });
      }),
      RUNS,
    );
  });

  it('never violates workspace fencing', () => {
    fc.assert(
      fc.property(anyScenario, (input) => {
        for (const b of planBatch(input).bind) {
          if (!b.run.workspace) continue;
          const w = input.workspaces.get(b.run.workspace.name);
          assert.ok(w, 'workspace exists');
          assert.equal(w.phase, 'Bound');
          assert.equal(w.runtime, input.runtime);
          assert.equal(b.pod.name, w.boundPod);
          assert.ok(w.boundPodUID && b.pod.uid === w.boundPodUID, 'bound Pod UID matches');
        }
      }),
      RUNS,
    );
  });

  it('binds only to feasible Pods, fails exactly the invalid Runs, and leaves none waiting that could be placed', () => {
    fc.assert(
      fc.property(anyScenario, (input) => {
        const plan = planBatch(input);
        const final = replay(input, plan, (run, pod, m, req) =>
          assert.ok(m.feasible(run, pod, req), `${run.name} bound to infeasible ${pod.name}`),
        );
        for (const f of plan.fail)
          assert.equal(
            refRequests(f.run.requests),
            undefined,
            `${f.run.name} failed (${f.reason}) with valid requests`,
          );
        for (const w of plan.wait) {
          const req = refRequests(w.run.requests);
          assert.ok(req, `${w.run.name} has invalid requests but waits`);
          assert.deepEqual(
            input.pods.filter((p) => final.feasible(w.run, p, req)).map((p) => p.name),
            [],
            `${w.run.name} waits (${w.reason}) though Pods are feasible`,
          );
        }
      }),
      RUNS,
    );
  });

  it('without preferred terms, picks the least loaded feasible Pod (dominant, then total utilization), ties by name', () => {
    fc.assert(
      fc.property(anyScenario, (input) => {
        replay(input, planBatch(input), (run, pod, m, req) => {
          const prefs = [run.affinity?.runAffinity, run.affinity?.runAntiAffinity].flatMap(
            (r) => r?.preferredDuringSchedulingIgnoredDuringExecution ?? [],
          );
          if (prefs.length > 0) return;
          const chosen = m.loadKey(pod, req);
          for (const p of input.pods.filter((x) => m.feasible(run, x, req))) {
            const k = m.loadKey(p, req);
            const c = cmp(chosen.max, k.max) || cmp(chosen.sum, k.sum);
            assert.ok(
              c < 0 || (c === 0 && pod.name <= p.name),
              `${run.name}: ${pod.name} chosen over less loaded ${p.name}`,
            );
          }
        });
      }),
      RUNS,
    );
  });
});
