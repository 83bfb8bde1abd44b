import assert from 'node:assert/strict';
import type { Operation } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { PARAMETERS_FINALIZER, type Job, type JobStatus, type KubernetesParameters } from '../../lib/jobclass/api.ts';
import { FakeState, NOW, R, T0, X, events, job, jobClass, k8sParams, statuses } from '../../lib/jobclass/testing.ts';
import { reconcileKubernetesJob } from './core.ts';
import fn, { handle } from './index.ts';
import { batchJobName } from './render.ts';

const status = (ops: Operation[]): JobStatus => statuses(ops)[0] as JobStatus;
const condition = (ops: Operation[], type: string): { status: string; reason: string } | undefined =>
  status(ops)?.conditions?.find((c) => c.type === type);
const creates = (ops: Operation[]): KubeObject[] =>
  ops
    .filter((o): o is Extract<Operation, { op: 'create' }> => o.op === 'create' && o.resource === X.batchJobs)
    .map((o) => o.object);

function accepted(j: Job, extra: Partial<JobStatus> = {}): Job {
  return {
    ...j,
    status: {
      phase: 'Pending',
      conditions: [{ type: 'Accepted', status: 'True', reason: 'Accepted', message: '', lastTransitionTime: T0 }],
      resolvedJobClass: {
        name: 'rootless',
        uid: 'uid-rootless',
        controllerName: 'execution.ayatori.ddupan.top/kubernetes',
        parametersRef: {
          group: 'execution.ayatori.ddupan.top',
          kind: 'KubernetesExecutionParameters',
          name: 'rootless',
          uid: 'puid-rootless',
        },
      },
      effectiveResources: { requests: { cpu: '250m', memory: '256Mi' }, limits: { cpu: '2', memory: '2Gi' } },
      ...extra,
    },
  };
}

const params: KubernetesParameters = {
  ...k8sParams('rootless', { runtimeClass: 'runc' }),
  spec: {
    serviceAccountName: 'ayatori-job',
    runtimeClassName: 'runc',
    imagePullPolicy: 'IfNotPresent',
    scheduling: {
      nodeSelector: { 'ayatori.ddupan.top/node-role': 'execution' },
      tolerations: [{ key: 'ayatori.ddupan.top/execution', operator: 'Equal', value: 'true', effect: 'NoSchedule' }],
    },
    podSecurityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
  },
};

function world(): FakeState {
  return new FakeState([
    [X.jobClasses, jobClass('rootless')],
    [X.kubernetesParameters, params],
    [R.serviceAccounts, { metadata: { name: 'ayatori-job', namespace: 'team-a' } }],
  ]);
}

function batch(j: Job, s: Record<string, unknown> = {}, spec: Record<string, unknown> = {}): KubeObject {
  return {
    metadata: {
      name: batchJobName(j),
      namespace: 'team-a',
      uid: 'bj-uid',
      ownerReferences: [
        {
          apiVersion: 'execution.ayatori.ddupan.top/v1alpha1',
          kind: 'Job',
          name: j.metadata.name ?? '',
          uid: j.metadata.uid ?? '',
          controller: true,
        },
      ],
    },
    spec,
    status: s,
  };
}

const scheduled = (j: Job): Job =>
  accepted(j, {
    execution: {
      controllerName: 'execution.ayatori.ddupan.top/kubernetes',
      apiVersion: 'batch/v1',
      kind: 'Job',
      name: batchJobName(j),
      uid: 'bj-uid',
    },
    conditions: [
      { type: 'Accepted', status: 'True', reason: 'Accepted', message: '', lastTransitionTime: T0 },
      { type: 'Scheduled', status: 'True', reason: 'ExecutionCreated', message: '', lastTransitionTime: T0 },
    ],
  });

describe('jobclass-kubernetes: Ensure', () => {
  it('creates an owned batch/v1 Job with the parameters and the effective resources from status', () => {
    const j = accepted(
      job('train', {
        env: [{ name: 'P', valueFrom: { secretKeyRef: { name: 'db', key: 'pw', optional: true } } }],
        imagePullSecret: { name: 'regcred' },
        activeDeadlineSeconds: 600,
      }),
    );
    const ops = reconcileKubernetesJob(j, world(), NOW);
    const [bj] = creates(ops) as [
      KubeObject & {
        spec: {
          backoffLimit: number;
          activeDeadlineSeconds: number;
          template: { spec: Record<string, unknown> & { containers: Record<string, unknown>[] } };
        };
      },
    ];
    assert.equal(bj.metadata.name, batchJobName(j));
    assert.deepEqual(bj.metadata.ownerReferences, [
      {
        apiVersion: 'execution.ayatori.ddupan.top/v1alpha1',
        kind: 'Job',
        name: 'train',
        uid: 'juid-train',
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    assert.equal(bj.metadata.labels?.['execution.ayatori.ddupan.top/job-uid'], 'juid-train');
    const pod = bj.spec.template.spec;
    assert.deepEqual(
      [pod.serviceAccountName, pod.runtimeClassName, pod.restartPolicy],
      ['ayatori-job', 'runc', 'Never'],
    );
    assert.deepEqual(pod.nodeSelector, params.spec.scheduling?.nodeSelector);
    assert.deepEqual(pod.tolerations, params.spec.scheduling?.tolerations);
    assert.deepEqual(pod.securityContext, params.spec.podSecurityContext);
    assert.deepEqual(pod.imagePullSecrets, [{ name: 'regcred' }]);
    assert.deepEqual(pod.containers[0], {
      name: 'job',
      image: 'busybox:1.36',
      command: ['sh', '-c', 'echo hi'],
      env: j.spec.env,
      imagePullPolicy: 'IfNotPresent',
      resources: { requests: { cpu: '250m', memory: '256Mi' }, limits: { cpu: '2', memory: '2Gi' } },
    });
    assert.deepEqual([bj.spec.backoffLimit, bj.spec.activeDeadlineSeconds], [0, 600]);
    assert.deepEqual(
      [condition(ops, 'Scheduled')?.reason, status(ops).execution?.name],
      ['ExecutionCreated', batchJobName(j)],
    );
  });

  it('keeps the Job unscheduled when the ServiceAccount is missing, never using the default one', () => {
    const state = world()
      .remove(R.serviceAccounts, 'team-a', 'ayatori-job')
      .put(R.serviceAccounts, { metadata: { name: 'default', namespace: 'team-a' } });
    const ops = reconcileKubernetesJob(accepted(job('j')), state, NOW);
    assert.deepEqual(creates(ops), []);
    assert.deepEqual(
      [condition(ops, 'Scheduled')?.status, condition(ops, 'Scheduled')?.reason],
      ['False', 'ServiceAccountNotFound'],
    );
    assert.deepEqual(
      events(ops).map((e) => [e.type, e.reason]),
      [['Warning', 'ServiceAccountNotFound']],
    );
  });

  it('a ServiceAccount or class change wakes each waiting Job under its own key, never a batch key', () => {
    const other = { ...accepted(job('k')), metadata: { ...job('k').metadata, namespace: 'team-b' } };
    const state = world()
      .put(X.jobs, accepted(job('j')))
      .put(X.jobs, other)
      .put(X.jobs, scheduled(job('s')));
    const also = fn.trigger.type === 'watch' ? (fn.trigger.also ?? []) : [];
    const wakes = (resource: unknown, o: KubeObject): string[] =>
      also.find((a) => a.resource === resource)!.map(o, state);
    assert.deepEqual(wakes(R.serviceAccounts, { metadata: { name: 'ayatori-job', namespace: 'team-a' } }), [
      'team-a/j',
    ]);
    assert.deepEqual(wakes(X.jobClasses, jobClass('rootless')), ['team-a/j', 'team-b/k', '@params:rootless']);
  });

  it('does not create while the class is not Ready (e.g. its RuntimeClass is missing)', () => {
    const ops = reconcileKubernetesJob(
      accepted(job('j')),
      world().put(X.jobClasses, jobClass('rootless', { ready: false })),
      NOW,
    );
    assert.deepEqual([creates(ops).length, condition(ops, 'Scheduled')?.reason], [0, 'JobClassNotReady']);
  });

  it('never creates on a recreated class or parameters object', () => {
    assert.equal(
      condition(
        reconcileKubernetesJob(
          accepted(job('j')),
          world().put(X.jobClasses, jobClass('rootless', { uid: 'new' })),
          NOW,
        ),
        'Scheduled',
      )?.reason,
      'JobClassReplaced',
    );
    assert.equal(
      condition(
        reconcileKubernetesJob(
          accepted(job('j')),
          world().put(X.kubernetesParameters, k8sParams('rootless', { uid: 'new' })),
          NOW,
        ),
        'Scheduled',
      )?.reason,
      'ParametersReplaced',
    );
  });

  it('adopts a batch Job created before a crash instead of creating a second one', () => {
    const j = accepted(job('j'));
    const ops = reconcileKubernetesJob(j, world().put(X.batchJobs, batch(j, { active: 1 })), NOW);
    assert.deepEqual(creates(ops), []);
    assert.deepEqual([status(ops).execution?.uid, status(ops).phase], ['bj-uid', 'Running']);
  });

  it('refuses a same-name batch Job it does not own', () => {
    const j = accepted(job('j'));
    const foreign = { ...batch(j), metadata: { ...batch(j).metadata, ownerReferences: [] } };
    assert.equal(
      condition(reconcileKubernetesJob(j, world().put(X.batchJobs, foreign), NOW), 'Scheduled')?.reason,
      'ExecutionNameConflict',
    );
  });

  it('cancels before any execution without creating one', () => {
    const ops = reconcileKubernetesJob(accepted(job('j', { cancelRequested: true })), world(), NOW);
    assert.deepEqual(
      [creates(ops).length, condition(ops, 'Failed')?.reason, status(ops).phase],
      [0, 'Cancelled', 'Failed'],
    );
  });
});

describe('jobclass-kubernetes: Observe, Cancel, Delete', () => {
  it('maps Complete and Failed (DeadlineExceeded, other) to terminal conditions', () => {
    const j = scheduled(job('j'));
    const ok = reconcileKubernetesJob(
      j,
      world().put(X.batchJobs, batch(j, { startTime: T0, conditions: [{ type: 'Complete', status: 'True' }] })),
      NOW,
    );
    assert.deepEqual(
      [status(ok).phase, condition(ok, 'Succeeded')?.reason, status(ok).completionTime, status(ok).startTime],
      ['Succeeded', 'Completed', NOW.toISOString(), T0],
    );
    const dl = reconcileKubernetesJob(
      j,
      world().put(
        X.batchJobs,
        batch(j, { conditions: [{ type: 'Failed', status: 'True', reason: 'DeadlineExceeded' }] }),
      ),
      NOW,
    );
    assert.equal(condition(dl, 'Failed')?.reason, 'DeadlineExceeded');
    const bo = reconcileKubernetesJob(
      j,
      world().put(
        X.batchJobs,
        batch(j, { conditions: [{ type: 'Failed', status: 'True', reason: 'BackoffLimitExceeded' }] }),
      ),
      NOW,
    );
    assert.equal(condition(bo, 'Failed')?.reason, 'ExecutionFailed');
  });

  it('observes and cancels existing executions even when the class is not Ready or gone', () => {
    const j = scheduled(job('j'));
    const noClass = new FakeState().put(X.batchJobs, batch(j, { conditions: [{ type: 'Complete', status: 'True' }] }));
    assert.equal(status(reconcileKubernetesJob(j, noClass, NOW)).phase, 'Succeeded');
    const cancelled = { ...j, spec: { ...j.spec, cancelRequested: true } };
    const notReady = world()
      .put(X.jobClasses, jobClass('rootless', { ready: false }))
      .put(X.batchJobs, batch(j, { active: 1 }));
    const ops = reconcileKubernetesJob(cancelled, notReady, NOW);
    assert.deepEqual(
      ops.find((o) => o.op === 'patch'),
      {
        op: 'patch',
        resource: X.batchJobs,
        namespace: 'team-a',
        name: batchJobName(j),
        patch: { spec: { suspend: true } },
      },
    );
    assert.equal(status(ops).execution?.cancelIssuedAt, NOW.toISOString());
    const stopping = reconcileKubernetesJob(
      cancelled,
      world().put(X.batchJobs, batch(j, { active: 1 }, { suspend: true })),
      NOW,
    );
    assert.ok(
      !stopping.some((o) => o.op === 'patch') && !statuses(stopping).some((s) => (s as JobStatus).phase === 'Failed'),
    );
    const done = reconcileKubernetesJob(
      cancelled,
      world().put(X.batchJobs, batch(j, { active: 0 }, { suspend: true })),
      NOW,
    );
    assert.deepEqual([status(done).phase, condition(done, 'Failed')?.reason], ['Failed', 'Cancelled']);
  });

  it('reports ResultUnknown when the recorded batch Job disappears or is replaced, and never re-creates it', () => {
    const j = scheduled(job('j'));
    const gone = reconcileKubernetesJob(j, world(), NOW);
    assert.deepEqual(
      [creates(gone).length, condition(gone, 'ResultUnknown')?.reason, status(gone).phase],
      [0, 'ExecutionNotFound', 'Unknown'],
    );
    const replaced = { ...batch(j), metadata: { ...batch(j).metadata, uid: 'other' } };
    assert.equal(
      condition(reconcileKubernetesJob(j, world().put(X.batchJobs, replaced), NOW), 'ResultUnknown')?.reason,
      'ExecutionReplaced',
    );
    const unknown = {
      ...j,
      status: {
        ...j.status!,
        conditions: [
          ...j.status!.conditions!,
          {
            type: 'ResultUnknown',
            status: 'True' as const,
            reason: 'ExecutionNotFound',
            message: '',
            lastTransitionTime: T0,
          },
        ],
      },
    };
    const back = reconcileKubernetesJob(unknown, world().put(X.batchJobs, batch(j, { active: 1 })), NOW);
    assert.deepEqual([condition(back, 'ResultUnknown')?.status, status(back).phase], ['False', 'Running']);
  });

  it('leaves deletion to owner-reference garbage collection and ignores other controllers', () => {
    const j = scheduled(job('j'));
    assert.deepEqual(
      reconcileKubernetesJob({ ...j, metadata: { ...j.metadata, deletionTimestamp: T0 } }, world(), NOW),
      [],
    );
    const os = {
      ...j,
      status: {
        ...j.status!,
        resolvedJobClass: {
          ...j.status!.resolvedJobClass!,
          controllerName: 'execution.ayatori.ddupan.top/opensandbox',
        },
      },
    };
    assert.deepEqual(reconcileKubernetesJob(os, world(), NOW), []);
  });

  it('names batch Jobs deterministically within 63 characters', () => {
    const long = {
      ...job('x'.repeat(200)),
      metadata: { ...job('x').metadata, name: 'a'.repeat(200), uid: '0123abcd-ffff' },
    };
    assert.equal(batchJobName(long), `${'a'.repeat(54)}-0123abcd`);
    assert.equal(batchJobName(job('train')), 'train-juidtrai');
  });
});

describe('jobclass-kubernetes: parameters protection', () => {
  it('adds the finalizer, blocks deletion while a class references the parameters, then releases it', () => {
    const state = world().put(X.kubernetesParameters, k8sParams('rootless'));
    const add = handle({ key: '@params:rootless', object: undefined, state, now: NOW });
    assert.deepEqual((add[0] as { patch: unknown }).patch, {
      metadata: { resourceVersion: '1', finalizers: [PARAMETERS_FINALIZER] },
    });
    const p = k8sParams('rootless');
    state.put(X.kubernetesParameters, {
      ...p,
      metadata: { ...p.metadata, finalizers: [PARAMETERS_FINALIZER], deletionTimestamp: T0 },
    });
    assert.deepEqual(
      events(handle({ key: '@params:rootless', object: undefined, state, now: NOW })).map((e) => e.reason),
      ['DeletionBlocked'],
    );
    state.remove(X.jobClasses, undefined, 'rootless');
    const release = handle({ key: '@params:rootless', object: undefined, state, now: NOW });
    assert.deepEqual((release[0] as { patch: unknown }).patch, { metadata: { resourceVersion: '1', finalizers: [] } });
  });
});
