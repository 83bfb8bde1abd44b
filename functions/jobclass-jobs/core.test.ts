import assert from 'node:assert/strict';
import type { Operation } from '../../lib/fn/types.ts';
import { NAMESPACE_DEFAULT_ANNOTATION, type Job, type JobStatus } from '../../lib/jobclass/api.ts';
import {
  FakeState,
  NOW,
  R,
  X,
  events,
  job,
  jobClass,
  k8sParams,
  namespace,
  osParams,
  secret,
  statuses,
} from '../../lib/jobclass/testing.ts';
import { reconcileJob, SECRET_RECHECK_MS } from './core.ts';
import fn, { secretRefs } from './index.ts';

const status = (ops: Operation[]): JobStatus => statuses(ops)[0] as JobStatus;
const accepted = (ops: Operation[]): { status: string; reason: string; message: string } | undefined =>
  status(ops)?.conditions?.find((c) => c.type === 'Accepted');
const withStatus = (j: Job, s: JobStatus | undefined): Job => ({ ...j, status: s });

function world(): FakeState {
  return new FakeState([
    [X.namespaces, namespace('team-a', { 'ayatori.ddupan.top/execution': 'enabled' })],
    [
      X.jobClasses,
      jobClass('rootless', {
        isDefault: true,
        resources: {
          defaults: { requests: { cpu: '250m', memory: '256Mi' }, limits: { cpu: '2', memory: '2Gi' } },
          maximum: { limits: { cpu: '8', memory: '16Gi' } },
        },
      }),
    ],
    [X.kubernetesParameters, k8sParams('rootless')],
    [
      X.jobClasses,
      jobClass('microvm', {
        controller: 'opensandbox',
        allowed: { 'ayatori.ddupan.top/microvm-access': 'true' },
        resources: { defaults: { limits: { cpu: '2', memory: '2Gi' } } },
      }),
    ],
    [X.openSandboxParameters, osParams('microvm')],
  ]);
}

describe('jobclass-jobs: class resolution and acceptance', () => {
  it('accepts with the global default, freezing class and parameters UIDs and effective resources', () => {
    const ops = reconcileJob(job('j'), world(), NOW);
    const s = status(ops);
    assert.equal(accepted(ops)?.status, 'True');
    assert.deepEqual(s.resolvedJobClass, {
      name: 'rootless',
      uid: 'uid-rootless',
      controllerName: 'execution.ayatori.ddupan.top/kubernetes',
      parametersRef: {
        group: 'execution.ayatori.ddupan.top',
        kind: 'KubernetesExecutionParameters',
        name: 'rootless',
        uid: 'puid-rootless',
      },
    });
    assert.deepEqual(s.effectiveResources, {
      requests: { cpu: '250m', memory: '256Mi' },
      limits: { cpu: '2', memory: '2Gi' },
    });
    assert.equal(s.phase, 'Pending');
    assert.deepEqual(
      events(ops).map((e) => [e.type, e.reason]),
      [['Normal', 'Accepted']],
    );
  });

  it('prefers the explicit class over the namespace default over the global default', () => {
    const state = world().put(X.jobClasses, jobClass('ns-class')).put(X.kubernetesParameters, k8sParams('ns-class'));
    state.put(X.namespaces, namespace('team-a', {}, { [NAMESPACE_DEFAULT_ANNOTATION]: 'ns-class' }));
    assert.equal(status(reconcileJob(job('j'), state, NOW)).resolvedJobClass?.name, 'ns-class');
    assert.equal(
      status(reconcileJob(job('j', { jobClassName: 'rootless' }), state, NOW)).resolvedJobClass?.name,
      'rootless',
    );
  });

  it('reports NoDefaultJobClass and AmbiguousDefaultJobClass (Warning), never picking the newest', () => {
    const none = new FakeState([
      [X.namespaces, namespace('team-a')],
      [X.jobClasses, jobClass('a')],
    ]);
    assert.equal(accepted(reconcileJob(job('j'), none, NOW))?.reason, 'NoDefaultJobClass');
    const two = world().put(X.jobClasses, jobClass('newer', { isDefault: true }));
    const ops = reconcileJob(job('j'), two, NOW);
    assert.equal(accepted(ops)?.reason, 'AmbiguousDefaultJobClass');
    assert.equal(status(ops).resolvedJobClass, undefined);
    assert.deepEqual(
      events(ops).map((e) => [e.type, e.reason]),
      [['Warning', 'AmbiguousDefaultJobClass']],
    );
  });

  it('reports an unknown explicit class', () => {
    assert.equal(accepted(reconcileJob(job('j', { jobClassName: 'nope' }), world(), NOW))?.reason, 'JobClassNotFound');
  });

  it('enforces allowedNamespaces; a label added later admits the Job, a label removed after acceptance changes nothing', () => {
    const state = world();
    const j = job('j', { jobClassName: 'microvm', resources: { requests: { cpu: '1' } } });
    const denied = reconcileJob(j, state, NOW);
    assert.equal(accepted(denied)?.reason, 'NamespaceNotAllowed');
    state.put(X.namespaces, namespace('team-a', { 'ayatori.ddupan.top/microvm-access': 'true' }));
    const ok = reconcileJob(withStatus(j, status(denied)), state, NOW);
    assert.equal(accepted(ok)?.status, 'True');
    state.put(X.namespaces, namespace('team-a'));
    assert.deepEqual(reconcileJob(withStatus(j, status(ok)), state, NOW), []);
  });

  it('waits while the class is not accepted (or its latest generation not yet evaluated) or is being deleted', () => {
    const state = world().put(X.jobClasses, jobClass('broken', { accepted: false }));
    assert.equal(
      accepted(reconcileJob(job('j', { jobClassName: 'broken' }), state, NOW))?.reason,
      'JobClassNotAccepted',
    );
    const edited = jobClass('rootless');
    state.put(X.jobClasses, { ...edited, metadata: { ...edited.metadata, generation: 2 } });
    assert.match(
      accepted(reconcileJob(job('j', { jobClassName: 'rootless' }), state, NOW))?.message ?? '',
      /generation 2 is not evaluated yet/,
    );
    const c = jobClass('rootless');
    state.put(X.jobClasses, { ...c, metadata: { ...c.metadata, deletionTimestamp: '2026-09-17T09:00:00Z' } });
    assert.equal(
      accepted(reconcileJob(job('j', { jobClassName: 'rootless' }), state, NOW))?.reason,
      'JobClassTerminating',
    );
  });

  it('rejects resources outside the policy and never re-evaluates an accepted Job when the policy changes', () => {
    const state = world();
    assert.equal(
      accepted(reconcileJob(job('big', { resources: { limits: { cpu: '16' } } }), state, NOW))?.reason,
      'ResourcesOutOfPolicy',
    );
    const ok = reconcileJob(job('j'), state, NOW);
    state.put(
      X.jobClasses,
      jobClass('rootless', { isDefault: true, resources: { defaults: { requests: { cpu: '1' } } } }),
    );
    assert.deepEqual(
      reconcileJob(withStatus(job('j'), status(ok)), state, NOW),
      [],
      'effective resources stay as accepted',
    );
  });

  it('requires Secret/ConfigMap references to resolve under optional semantics', () => {
    const state = world();
    const j = job('j', {
      env: [
        { name: 'P', valueFrom: { secretKeyRef: { name: 'db', key: 'pw' } } },
        { name: 'O', valueFrom: { configMapKeyRef: { name: 'x', key: 'y', optional: true } } },
      ],
    });
    const waiting = reconcileJob(j, state, NOW);
    assert.equal(accepted(waiting)?.reason, 'SecretNotFound');
    assert.deepEqual(
      waiting.at(-1),
      { op: 'requeue', afterMs: SECRET_RECHECK_MS },
      'Secrets are not watched: the Job re-checks',
    );
    state.put(R.secrets, secret('team-a', 'db', { pw: 'x' }));
    assert.equal(accepted(reconcileJob(withStatus(j, status(waiting)), state, NOW))?.status, 'True');
  });

  it('applies OpenSandbox allowances and representability at acceptance', () => {
    const state = world().put(X.namespaces, namespace('team-a', { 'ayatori.ddupan.top/microvm-access': 'true' }));
    state
      .put(R.secrets, secret('team-a', 'db', { pw: 'x' }))
      .put(R.secrets, secret('team-a', 'regcred', {}, 'kubernetes.io/dockerconfigjson'));
    const base = { jobClassName: 'microvm' };
    assert.equal(
      accepted(
        reconcileJob(
          job('a', { ...base, env: [{ name: 'P', valueFrom: { secretKeyRef: { name: 'db', key: 'pw' } } }] }),
          state,
          NOW,
        ),
      )?.reason,
      'SecretEnvNotAllowed',
    );
    assert.equal(
      accepted(reconcileJob(job('b', { ...base, imagePullSecret: { name: 'regcred' } }), state, NOW))?.reason,
      'ImageAuthNotAllowed',
    );
    assert.equal(accepted(reconcileJob(job('c', { ...base, command: [] }), state, NOW))?.reason, 'CommandRequired');
    state.put(X.openSandboxParameters, osParams('microvm', { mapping: 'Native' }));
    assert.equal(
      accepted(reconcileJob(job('d', { ...base, resources: { requests: { cpu: '1' } } }), state, NOW))?.reason,
      'ResourcesNotRepresentable',
    );
    assert.equal(
      accepted(reconcileJob(job('e', { ...base, resources: { requests: { cpu: '2', memory: '2048Mi' } } }), state, NOW))
        ?.status,
      'True',
      'requests == limits numerically',
    );
  });
});

describe('jobclass-jobs: frozen resolution', () => {
  const frozenOn = (state: FakeState, j: Job): Job => withStatus(j, status(reconcileJob(j, state, NOW)));

  it('keeps the resolved class when the defaults change and never adopts a same-name class with a new UID', () => {
    const state = world();
    state.put(X.namespaces, namespace('team-a', { 'ayatori.ddupan.top/execution': 'enabled' }));
    const c = jobClass('rootless', { isDefault: true, accepted: false });
    state.put(X.jobClasses, c);
    const waiting = frozenOn(state, job('j'));
    assert.equal(waiting.status?.resolvedJobClass?.name, 'rootless');
    state
      .put(X.jobClasses, jobClass('rootless'))
      .put(X.jobClasses, jobClass('other', { isDefault: true }))
      .put(X.kubernetesParameters, k8sParams('other'));
    assert.equal(
      status(reconcileJob(waiting, state, NOW)).resolvedJobClass?.name,
      'rootless',
      'the new global default is not taken',
    );
    state.put(X.jobClasses, jobClass('rootless', { uid: 'recreated' }));
    const ops = reconcileJob(waiting, state, NOW);
    assert.equal(accepted(ops)?.reason, 'JobClassReplaced');
    assert.equal(status(ops).resolvedJobClass?.uid, 'uid-rootless');
  });

  it('never adopts recreated parameters', () => {
    const state = world().put(X.jobClasses, jobClass('rootless', { isDefault: true, accepted: false }));
    const waiting = frozenOn(state, job('j'));
    state
      .put(X.jobClasses, jobClass('rootless', { isDefault: true }))
      .put(X.kubernetesParameters, k8sParams('rootless', { uid: 'new' }));
    assert.equal(accepted(reconcileJob(waiting, state, NOW))?.reason, 'ParametersReplaced');
  });
});

describe('jobclass-jobs: cancel, TTL and dependency keys', () => {
  it('cancels a Job that was never accepted: Failed/Cancelled, nothing ran', () => {
    const ops = reconcileJob(job('j', { cancelRequested: true, jobClassName: 'nope' }), world(), NOW);
    const s = status(ops);
    assert.deepEqual(
      [s.phase, s.conditions?.find((c) => c.type === 'Failed')?.reason, s.completionTime],
      ['Failed', 'Cancelled', NOW.toISOString()],
    );
  });

  it('deletes a finished Job after ttlSecondsAfterFinished, with a UID precondition', () => {
    const done = withStatus(job('j', { ttlSecondsAfterFinished: 60 }), {
      completionTime: '2026-09-17T09:59:30Z',
      conditions: [
        {
          type: 'Succeeded',
          status: 'True',
          reason: 'Completed',
          message: '',
          lastTransitionTime: '2026-09-17T09:59:30Z',
        },
      ],
    });
    assert.deepEqual(reconcileJob(done, world(), NOW), [{ op: 'requeue', afterMs: 30_000 }]);
    assert.deepEqual(reconcileJob(done, world(), new Date('2026-09-17T10:00:30Z')), [
      { op: 'delete', resource: X.jobs, namespace: 'team-a', name: 'j', uid: 'juid-j' },
    ]);
  });

  it('a class, parameters or namespace change wakes each pending Job under its own key, never a batch key', () => {
    const accepted = withStatus(job('j3'), {
      conditions: [
        { type: 'Accepted', status: 'True', reason: 'Accepted', message: '', lastTransitionTime: NOW.toISOString() },
      ],
    });
    const state = new FakeState([
      [X.namespaces, namespace('team-a')],
      [X.jobs, job('j1')],
      [X.jobs, job('j2', {}, 'team-b')],
      [X.jobs, accepted],
    ]);
    const also = fn.trigger.type === 'watch' ? (fn.trigger.also ?? []) : [];
    const wakes = (resource: unknown, o: unknown): string[] =>
      also.find((a) => a.resource === resource)!.map(o as Job, state);
    assert.deepEqual(wakes(X.jobClasses, { metadata: { name: 'x' } }), ['team-a/j1', 'team-b/j2']);
    assert.deepEqual(wakes(X.kubernetesParameters, { metadata: { name: 'p' } }), ['team-a/j1', 'team-b/j2']);
    assert.deepEqual(wakes(X.openSandboxParameters, { metadata: { name: 'p' } }), ['team-a/j1', 'team-b/j2']);
    assert.deepEqual(wakes(X.namespaces, namespace('team-b')), ['team-b/j2']);
  });

  it('reads only the Secrets pending Jobs name, by name, and never watches Secrets', () => {
    const j = job('j1', {
      env: [
        { name: 'P', valueFrom: { secretKeyRef: { name: 'db', key: 'pw' } } },
        { name: 'Q', valueFrom: { secretKeyRef: { name: 'db', key: 'q' } } },
      ],
      imagePullSecret: { name: 'regcred' },
    });
    const state = new FakeState([
      [X.jobs, j],
      [X.jobs, job('j2', {}, 'team-b')],
    ]);
    const refs = (key: string, object?: Job): string[] =>
      secretRefs({ key, object, state }).map((r) => `${r.namespace ?? ''}/${r.name}`);
    assert.deepEqual(refs('team-a/j1', j), ['team-a/db', 'team-a/regcred']);
    assert.deepEqual(
      refs(
        'team-a/j1',
        withStatus(j, {
          conditions: [
            {
              type: 'Accepted',
              status: 'True',
              reason: 'Accepted',
              message: '',
              lastTransitionTime: '2026-09-17T09:00:00Z',
            },
          ],
        }),
      ),
      [],
      'an accepted Job is not re-read',
    );
    assert.equal(fn.trigger.type === 'watch' && fn.trigger.also?.some((a) => a.resource === R.secrets), false);
    assert.deepEqual(
      fn.rbac.filter((r) => r.resources.includes('secrets')).map((r) => r.verbs),
      [['get']],
    );
  });
});
