import assert from 'node:assert/strict';
import {
  affinityVerdict,
  compileAffinity,
  preferredScore,
  topologyValue,
  type AffinityTarget,
  type CompiledAffinity,
} from './affinity.ts';
import { pod, run, term } from './testing.ts';
import type { RunAffinity, RunView, RuntimePod } from './types.ts';

const pods = [
  pod('p1', { nodeLabels: { 'kubernetes.io/hostname': 'n1', 'topology.kubernetes.io/zone': 'z1' } }),
  pod('p2', { nodeLabels: { 'kubernetes.io/hostname': 'n2', 'topology.kubernetes.io/zone': 'z1' } }),
  pod('p3', { nodeLabels: { 'kubernetes.io/hostname': 'n3', 'topology.kubernetes.io/zone': 'z2' } }),
  pod('p4', { nodeLabels: { 'kubernetes.io/hostname': 'n4' } }),
];
const index = new Map(pods.map((p) => [p.name, p]));
const target = (name: string, podName: string, labels: Record<string, string>, namespace = 'ns'): AffinityTarget => ({
  uid: `uid-${name}`,
  namespace,
  podName,
  labels,
});

function compiled(r: RunView, targets: AffinityTarget[]): CompiledAffinity {
  const c = compileAffinity(r, targets, index);
  if (typeof c === 'string') throw new Error(c);
  return c;
}

function feasible(affinity: RunAffinity, targets: AffinityTarget[], labels: Record<string, string> = {}): string[] {
  const c = compiled(run('r', { affinity, labels }), targets);
  return pods.filter((p: RuntimePod) => affinityVerdict(c, p) === 'ok').map((p) => p.name);
}

const required = (t: ReturnType<typeof term>): RunAffinity => ({
  runAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [t] },
});
const requiredAnti = (t: ReturnType<typeof term>): RunAffinity => ({
  runAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [t] },
});

describe('run-scheduler affinity', () => {
  it('derives topology values from the Pod name or its Node labels', () => {
    assert.equal(topologyValue(pods[0] as RuntimePod, 'kruntimes.io/runtime-pod'), 'p1');
    assert.equal(topologyValue(pods[0] as RuntimePod, 'topology.kubernetes.io/zone'), 'z1');
    assert.equal(topologyValue(pods[3] as RuntimePod, 'topology.kubernetes.io/zone'), undefined);
    assert.equal(topologyValue(pod('bare'), 'kubernetes.io/hostname'), undefined);
  });

  it('required affinity needs a matching target in the same domain', () => {
    const targets = [target('a', 'p1', { job: 'build' })];
    assert.deepEqual(feasible(required(term({ job: 'build' })), targets), ['p1']);
    assert.deepEqual(feasible(required(term({ job: 'build' }, 'kubernetes.io/hostname')), targets), ['p1']);
    assert.deepEqual(
      feasible(required(term({ job: 'build' }, 'topology.kubernetes.io/zone')), targets),
      ['p1', 'p2'],
      'same zone; p4 has no zone label',
    );
    assert.deepEqual(
      feasible(required(term({ job: 'other' })), targets),
      [],
      'no target and the Run does not match its own selector',
    );
  });

  it('bootstraps a required term with no matching target when the Run matches its own selector', () => {
    assert.deepEqual(feasible(required(term({ job: 'build' })), [], { job: 'build' }), ['p1', 'p2', 'p3', 'p4']);
    assert.deepEqual(
      feasible(required(term({ job: 'build' }, 'topology.kubernetes.io/zone')), [], { job: 'build' }),
      ['p1', 'p2', 'p3'],
      'bootstrap still needs a domain',
    );
    assert.deepEqual(
      feasible(required(term({ job: 'build' })), [target('a', 'p2', { job: 'build' })], { job: 'build' }),
      ['p2'],
      'no bootstrap once a target exists',
    );
    assert.deepEqual(
      feasible(
        required(term({ job: 'build' }, 'kubernetes.io/hostname')),
        [target('a', 'elsewhere', { job: 'build' })],
        { job: 'build' },
      ),
      [],
      'a target on an unknown Pod still counts as existing, so no bootstrap; it is in no known domain',
    );
    assert.deepEqual(feasible(requiredAnti(term({ job: 'build' })), [], { job: 'build' }), ['p1', 'p2', 'p3', 'p4']);
  });

  it('required anti-affinity excludes the domains of matching targets only', () => {
    const targets = [target('a', 'p1', { app: 'web' }), target('b', 'p3', { app: 'db' })];
    assert.deepEqual(feasible(requiredAnti(term({ app: 'web' })), targets), ['p2', 'p3', 'p4']);
    assert.deepEqual(
      feasible(requiredAnti(term({ app: 'web' }, 'topology.kubernetes.io/zone')), targets),
      ['p3', 'p4'],
      'p4 has no zone: not excluded',
    );
    assert.deepEqual(
      feasible(requiredAnti(term({ app: 'web' }, 'topology.kubernetes.io/region')), targets),
      ['p1', 'p2', 'p3', 'p4'],
      'no Pod has a region',
    );
  });

  it('ignores the Run itself and targets of other namespaces', () => {
    const self = run('r', { labels: { app: 'web' }, affinity: requiredAnti(term({ app: 'web' })) });
    const c = compiled(self, [
      { uid: self.uid, namespace: 'ns', podName: 'p1', labels: { app: 'web' } },
      target('x', 'p2', { app: 'web' }, 'other'),
    ]);
    assert.deepEqual(
      pods.filter((p) => affinityVerdict(c, p) === 'ok').map((p) => p.name),
      ['p1', 'p2', 'p3', 'p4'],
    );
  });

  it('reports affinity before anti-affinity', () => {
    const c = compiled(
      run('r', { affinity: { ...required(term({ job: 'x' })), ...requiredAnti(term({ app: 'web' })) } }),
      [target('a', 'p1', { app: 'web', job: 'x' })],
    );
    assert.equal(affinityVerdict(c, pods[1] as RuntimePod), 'UnsatisfiedRunAffinity');
    assert.equal(affinityVerdict(c, pods[0] as RuntimePod), 'UnsatisfiedRunAntiAffinity');
  });

  it('scores preferred affinity and preferred anti-affinity by weight', () => {
    const affinity: RunAffinity = {
      runAffinity: {
        preferredDuringSchedulingIgnoredDuringExecution: [
          { weight: 30, runAffinityTerm: term({ job: 'build' }, 'topology.kubernetes.io/zone') },
        ],
      },
      runAntiAffinity: {
        preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 5, runAffinityTerm: term({ app: 'web' }) }],
      },
    };
    const c = compiled(run('r', { affinity }), [target('a', 'p1', { job: 'build', app: 'web' })]);
    assert.deepEqual(
      pods.map((p) => preferredScore(c, p)),
      [30, 35, 5, 5],
    );
  });

  it('rejects terms upstream cannot compile', () => {
    const bad = (affinity: unknown): string => {
      const c = compileAffinity(run('r', { affinity: affinity as RunAffinity }), [], index);
      return typeof c === 'string' ? c : 'compiled';
    };
    assert.equal(
      bad(
        required({
          labelSelector: { matchLabels: { a: 'b' } },
          topologyKey: 'example.com/rack' as 'kubernetes.io/hostname',
        }),
      ),
      'unsupported run affinity topology key "example.com/rack"',
    );
    assert.match(bad(requiredAnti(term({ 'bad key': 'x' }))), /^parse run affinity selector: label key "bad key"/);
    assert.match(
      bad({
        runAffinity: {
          preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 0, runAffinityTerm: term({ a: 'b' }) }],
        },
      }),
      /weight 0 must be an integer between 1 and 100/,
    );
    assert.match(
      bad({
        runAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ topologyKey: 'kruntimes.io/runtime-pod' }] },
      }),
      /no label selector/,
    );
  });
});
