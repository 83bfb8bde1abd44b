import assert from 'node:assert/strict';
import type { Operation } from '../../lib/fn/types.ts';
import type { JobClass, Job, OpenSandboxParameters } from '../../lib/jobclass/api.ts';
import { CLASS_FINALIZER } from '../../lib/jobclass/api.ts';
import {
  FakeState,
  NOW,
  R,
  X,
  events,
  job,
  jobClass,
  k8sParams,
  osParams,
  secret,
  statuses,
} from '../../lib/jobclass/testing.ts';
import { FnMetrics } from '../../lib/fn/metrics.ts';
import { PROBE_STALE_MS, reconcileClass } from './core.ts';
import fn, { DEFAULTS_KEY, handle, secretRefs } from './index.ts';

const STRICT = { insecureHosts: [] as string[] };
const bare = (c: JobClass): JobClass => ({ ...c, status: {} });
const cond = (ops: Operation[], type: string): { status: string; reason: string } | undefined =>
  (statuses(ops)[0]?.conditions as { type: string; status: string; reason: string }[] | undefined)?.find(
    (c) => c.type === type,
  );
const run = (c: JobClass, state: FakeState, policy = STRICT): Operation[] =>
  reconcileClass(c, { state, now: NOW, endpointPolicy: policy });

function probed(
  p: OpenSandboxParameters,
  ok: boolean,
  at: Date,
  reason = ok ? 'Reachable' : 'BackendUnreachable',
): OpenSandboxParameters {
  return {
    ...p,
    status: {
      conditions: [
        {
          type: 'BackendReachable',
          status: ok ? 'True' : 'False',
          reason,
          message: 'm',
          lastTransitionTime: at.toISOString(),
        },
      ],
      probe: { endpoint: p.spec.endpoint, apiKeySecretResourceVersion: '7', time: at.toISOString() },
    },
  };
}

describe('jobclass-controller: Accepted', () => {
  it('adds the protection finalizer before anything else', () => {
    const c = { ...bare(jobClass('rootless')), metadata: { ...jobClass('rootless').metadata, finalizers: [] } };
    const ops = run(c, new FakeState());
    assert.equal(ops.length, 1);
    assert.deepEqual((ops[0] as { patch: unknown }).patch, {
      metadata: { resourceVersion: '1', finalizers: [CLASS_FINALIZER] },
    });
  });

  it('rejects an unsupported controllerName', () => {
    const ops = run(bare(jobClass('x', { controller: 'example.com/other' })), new FakeState());
    assert.deepEqual(
      [cond(ops, 'Accepted')?.status, cond(ops, 'Accepted')?.reason],
      ['False', 'UnsupportedController'],
    );
    assert.equal(cond(ops, 'Ready')?.reason, 'NotAccepted');
    assert.deepEqual(
      events(ops).map((e) => [e.type, e.reason]),
      [
        ['Warning', 'UnsupportedController'],
        ['Warning', 'NotAccepted'],
      ],
    );
  });

  it('rejects a parametersRef kind the controller does not support (ConfigMap, wrong kind)', () => {
    for (const kind of ['ConfigMap', 'OpenSandboxExecutionParameters']) {
      const ops = run(bare(jobClass('x', { kind })), new FakeState());
      assert.equal(cond(ops, 'Accepted')?.reason, 'InvalidParametersReference', kind);
    }
  });

  it('reports ParametersNotFound, then accepts once the parameters appear', () => {
    const state = new FakeState();
    const c = bare(jobClass('rootless'));
    assert.equal(cond(run(c, state), 'Accepted')?.reason, 'ParametersNotFound');
    state.put(X.kubernetesParameters, k8sParams('rootless'));
    const ops = run(c, state);
    assert.deepEqual([cond(ops, 'Accepted')?.status, cond(ops, 'Ready')?.status], ['True', 'True']);
  });

  it('rejects an inconsistent resource policy and an invalid namespace selector', () => {
    const state = new FakeState([[X.kubernetesParameters, k8sParams('rootless')]]);
    const bad = bare(
      jobClass('rootless', { resources: { defaults: { requests: { cpu: '4' }, limits: { cpu: '2' } } } }),
    );
    assert.equal(cond(run(bad, state), 'Accepted')?.reason, 'InvalidResourcePolicy');
    const sel = {
      ...bare(jobClass('rootless')),
      spec: {
        ...jobClass('rootless').spec,
        allowedNamespaces: { matchExpressions: [{ key: 'a', operator: 'In' as const, values: [] }] },
      },
    };
    assert.equal(cond(run(sel, state), 'Accepted')?.reason, 'InvalidAllowedNamespaces');
  });

  it('rejects an http:// OpenSandbox endpoint unless the controller allows that host', () => {
    const state = new FakeState([
      [X.openSandboxParameters, osParams('microvm', { endpoint: 'http://127.0.0.1:8080' })],
      [R.secrets, secret('ayatori-system', 'opensandbox-api', { 'api-key': 'k' })],
    ]);
    const c = bare(jobClass('microvm', { controller: 'opensandbox' }));
    assert.equal(cond(run(c, state), 'Accepted')?.reason, 'InvalidParameters');
    assert.equal(cond(run(c, state, { insecureHosts: ['127.0.0.1'] }), 'Accepted')?.status, 'True');
  });

  it('writes nothing when the status is unchanged', () => {
    const state = new FakeState([[X.kubernetesParameters, k8sParams('rootless')]]);
    const first = statuses(run(bare(jobClass('rootless')), state))[0] as JobClass['status'];
    assert.deepEqual(run({ ...jobClass('rootless'), status: first }, state), []);
  });
});

describe('jobclass-controller: Ready', () => {
  it('Kubernetes: Ready only while the RuntimeClass exists', () => {
    const state = new FakeState([[X.kubernetesParameters, k8sParams('rootless', { runtimeClass: 'gvisor' })]]);
    const c = bare(jobClass('rootless'));
    assert.deepEqual(
      [cond(run(c, state), 'Ready')?.status, cond(run(c, state), 'Ready')?.reason],
      ['False', 'RuntimeClassNotFound'],
    );
    state.put(X.runtimeClasses, { metadata: { name: 'gvisor' } });
    assert.equal(cond(run(c, state), 'Ready')?.status, 'True');
  });

  it('OpenSandbox: API key Secret, key, probe freshness and verdict decide Ready', () => {
    const p = osParams('microvm');
    const c = bare(jobClass('microvm', { controller: 'opensandbox' }));
    const state = new FakeState([[X.openSandboxParameters, p]]);
    assert.equal(cond(run(c, state), 'Ready')?.reason, 'ApiKeySecretNotFound');
    state.put(R.secrets, secret('ayatori-system', 'opensandbox-api', { other: 'x' }));
    assert.equal(cond(run(c, state), 'Ready')?.reason, 'ApiKeyMissing');
    state.put(R.secrets, secret('ayatori-system', 'opensandbox-api', { 'api-key': 'k1' }));
    assert.equal(cond(run(c, state), 'Ready')?.reason, 'BackendNotProbed');
    state.put(X.openSandboxParameters, probed(p, true, new Date(NOW.getTime() - 1000)));
    const ok = run(c, state);
    assert.equal(cond(ok, 'Ready')?.status, 'True');
    assert.deepEqual(ok.at(-1), { op: 'requeue', afterMs: PROBE_STALE_MS });
    state.put(X.openSandboxParameters, probed(p, false, new Date(NOW.getTime() - 1000), 'BackendAuthenticationFailed'));
    assert.equal(cond(run(c, state), 'Ready')?.reason, 'BackendAuthenticationFailed');
    state.put(X.openSandboxParameters, probed(p, true, new Date(NOW.getTime() - PROBE_STALE_MS)));
    assert.equal(cond(run(c, state), 'Ready')?.reason, 'BackendProbeStale');
  });

  it('OpenSandbox: a rotated key keeps the last verdict, a changed endpoint needs a new probe', () => {
    const p = probed(osParams('microvm'), true, NOW);
    const c = bare(jobClass('microvm', { controller: 'opensandbox' }));
    const state = new FakeState([
      [X.openSandboxParameters, p],
      [R.secrets, secret('ayatori-system', 'opensandbox-api', { 'api-key': 'k2' }, 'Opaque', '8')],
    ]);
    assert.equal(cond(run(c, state), 'Ready')?.status, 'True');
    state.put(X.openSandboxParameters, { ...p, spec: { ...p.spec, endpoint: 'https://failover.example.internal' } });
    assert.equal(cond(run(c, state), 'Ready')?.reason, 'BackendNotProbed');
  });
});

describe('jobclass-controller: deletion protection', () => {
  const deleting = (c: JobClass): JobClass => ({
    ...c,
    metadata: { ...c.metadata, deletionTimestamp: '2026-09-17T09:59:00Z' },
  });
  const resolvedTo = (j: Job, uid: string, finished = false): Job => ({
    ...j,
    status: {
      resolvedJobClass: {
        name: 'rootless',
        uid,
        controllerName: 'x',
        parametersRef: { group: 'g', kind: 'k', name: 'n' },
      },
      conditions: finished
        ? [
            {
              type: 'Succeeded',
              status: 'True',
              reason: 'Completed',
              message: '',
              lastTransitionTime: NOW.toISOString(),
            },
          ]
        : [],
    },
  });

  it('keeps the finalizer while a non-terminal Job references the class UID, with a Warning', () => {
    const state = new FakeState([
      [X.kubernetesParameters, k8sParams('rootless')],
      [X.jobs, resolvedTo(job('running'), 'uid-rootless')],
    ]);
    const ops = run(deleting(jobClass('rootless')), state);
    assert.ok(!ops.some((o) => o.op === 'patch'));
    assert.deepEqual(
      events(ops).map((e) => e.reason),
      ['DeletionBlocked'],
    );
    assert.match(events(ops)[0]!.message, /team-a\/running/);
  });

  it('releases the finalizer once only terminal Jobs (or Jobs of another UID) remain', () => {
    const state = new FakeState([
      [X.kubernetesParameters, k8sParams('rootless')],
      [X.jobs, resolvedTo(job('done'), 'uid-rootless', true)],
      [X.jobs, resolvedTo(job('other'), 'uid-of-an-older-rootless')],
    ]);
    const ops = run(deleting(jobClass('rootless')), state);
    assert.deepEqual(
      ops.map((o) => o.op),
      ['patch'],
    );
    assert.deepEqual((ops[0] as { patch: unknown }).patch, { metadata: { resourceVersion: '1', finalizers: [] } });
  });
});

describe('jobclass-controller: competing global defaults', () => {
  it('exposes the alert as metrics for as long as it lasts: global defaults and ambiguous_default', async () => {
    const metrics = new FnMetrics(false);
    const state = new FakeState([
      [X.jobClasses, jobClass('a', { isDefault: true })],
      [X.jobClasses, jobClass('b', { isDefault: true })],
      [X.jobClasses, jobClass('c')],
    ]);
    for (const g of fn.trigger.type === 'watch' && 'gauges' in fn ? (fn.gauges ?? []) : [])
      metrics.stateGauge(g, () => state);
    const scrape = async (): Promise<string[]> =>
      (await metrics.registry.metrics()).split('\n').filter((l) => l.startsWith('kruntimes_jobclass_'));
    assert.deepEqual(await scrape(), [
      'kruntimes_jobclass_global_defaults 2',
      'kruntimes_jobclass_ambiguous_default 1',
    ]);
    state.put(X.jobClasses, {
      ...jobClass('b', { isDefault: true }),
      metadata: {
        ...jobClass('b').metadata,
        deletionTimestamp: NOW.toISOString(),
        annotations: { 'execution.ayatori.ddupan.top/is-default-job-class': 'true' },
      },
    });
    assert.deepEqual(await scrape(), [
      'kruntimes_jobclass_global_defaults 1',
      'kruntimes_jobclass_ambiguous_default 0',
    ]);
  });

  it('warns on each global default while there are several (the platform alert)', () => {
    const state = new FakeState([
      [X.kubernetesParameters, k8sParams('a')],
      [X.jobClasses, jobClass('a', { isDefault: true })],
      [X.jobClasses, jobClass('b', { isDefault: true })],
    ]);
    const ops = run(jobClass('a', { isDefault: true }), state);
    assert.deepEqual(
      events(ops).map((e) => [e.type, e.reason]),
      [['Warning', 'AmbiguousDefaultJobClass']],
    );
    state.remove(X.jobClasses, undefined, 'b');
    assert.deepEqual(events(run(jobClass('a', { isDefault: true }), state)), []);
  });

  it('a second default wakes the first one, so both alert (not only the class that changed)', () => {
    const also = fn.trigger.type === 'watch' ? fn.trigger.also?.find((a) => a.resource === X.jobClasses) : undefined;
    assert.deepEqual(
      also?.map(jobClass('b', { isDefault: true }), new FakeState([])),
      [DEFAULTS_KEY],
      'a default class wakes the defaults key',
    );
    assert.deepEqual(also?.map(jobClass('c'), new FakeState([])), [], 'other classes do not');
    const state = new FakeState([
      [X.kubernetesParameters, k8sParams('a')],
      [X.jobClasses, jobClass('a', { isDefault: true })],
      [X.jobClasses, jobClass('b', { isDefault: true })],
      [X.jobClasses, jobClass('c')],
    ]);
    const ops = handle({ key: DEFAULTS_KEY, object: undefined, state, now: NOW });
    assert.deepEqual(
      events(ops)
        .map((e) => [e.type, e.reason, (e as unknown as { involvedObject: { name: string } }).involvedObject.name])
        .sort(),
      [
        ['Warning', 'AmbiguousDefaultJobClass', 'a'],
        ['Warning', 'AmbiguousDefaultJobClass', 'b'],
      ],
    );
    assert.deepEqual(
      ops.filter((o) => o.op !== 'create'),
      [],
      'only the alert Events, no status writes under the shared key',
    );
    assert.deepEqual(secretRefs({ key: DEFAULTS_KEY, object: undefined, state }), []);
    state.remove(X.jobClasses, undefined, 'b');
    assert.deepEqual(handle({ key: DEFAULTS_KEY, object: undefined, state, now: NOW }), []);
  });
});

describe('jobclass-controller: dependency keys', () => {
  it('reconciles the classes referencing changed parameters and RuntimeClasses, and reads only their API key Secrets by name', () => {
    const state = new FakeState([
      [X.jobClasses, bare(jobClass('rootless'))],
      [X.jobClasses, bare(jobClass('microvm', { controller: 'opensandbox' }))],
      [X.kubernetesParameters, k8sParams('rootless', { runtimeClass: 'runc' })],
      [X.openSandboxParameters, osParams('microvm')],
    ]);
    const names = (key: string): string[] =>
      statuses(handle({ key, object: undefined, state, now: NOW })).map(() => key);
    assert.equal(names('@params:KubernetesExecutionParameters:rootless').length, 1);
    assert.equal(names('@runtimeclass:runc').length, 1);
    assert.equal(names('@secret:ayatori-system:opensandbox-api').length, 0, 'Secrets are not watched');
    const refs = (key: string, object?: JobClass): string[] =>
      secretRefs({ key, object, state }).map((r) => `${r.resource.resource}/${r.namespace ?? ''}/${r.name}`);
    assert.deepEqual(refs('microvm', jobClass('microvm', { controller: 'opensandbox' })), [
      'secrets/ayatori-system/opensandbox-api',
    ]);
    assert.deepEqual(refs('@params:OpenSandboxExecutionParameters:microvm'), [
      'secrets/ayatori-system/opensandbox-api',
    ]);
    assert.deepEqual(refs('rootless', jobClass('rootless')), []);
    assert.equal(fn.trigger.type === 'watch' && fn.trigger.also?.some((a) => a.resource === R.secrets), false);
    assert.deepEqual(
      fn.rbac.filter((r) => r.resources.includes('secrets')).map((r) => r.verbs),
      [['get']],
    );
  });
});
