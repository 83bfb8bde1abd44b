import assert from 'node:assert/strict';
import type { AdmissionContext, AdmissionRequest } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import {
  NAMESPACE_DEFAULT_ANNOTATION,
  type Job,
  type JobClass,
  type Namespace,
  type Parameters,
} from '../../lib/jobclass/api.ts';
import { job, jobClass, namespace, osParams } from '../../lib/jobclass/testing.ts';
import { review } from './core.ts';
import { admitJob } from './index.ts';

const policy = {
  defaults: { requests: { cpu: '250m', memory: '256Mi' }, limits: { cpu: '2', memory: '2Gi' } },
  maximum: { limits: { cpu: '8', memory: '16Gi' } },
};
const rootless = jobClass('rootless', { isDefault: true, resources: policy });
const microvm = jobClass('microvm', {
  controller: 'opensandbox',
  allowed: { 'ayatori.ddupan.top/microvm-access': 'true' },
  resources: { defaults: { limits: { cpu: '2', memory: '2Gi' } } },
});
const allowedNs = namespace('team-a', { 'ayatori.ddupan.top/microvm-access': 'true' });

const check = (
  j: Job,
  o: { ns?: Namespace; classes?: JobClass[]; params?: Parameters } = {},
): ReturnType<typeof review> =>
  review({ job: j, namespace: o.ns ?? allowedNs, classes: o.classes ?? [rootless, microvm], params: o.params });

describe('jobclass-admission review', () => {
  it('admits a Job whose class resolves and whose resources fit', () => {
    assert.deepEqual(check(job('j')), { allowed: true });
    assert.deepEqual(check(job('j', { jobClassName: 'microvm' }), { params: osParams('microvm') }), { allowed: true });
  });

  it('rejects an unknown explicit class and a missing namespace default', () => {
    const r = check(job('j', { jobClassName: 'nope' }));
    assert.deepEqual([r.allowed, r.code], [false, 422]);
    assert.match(r.message ?? '', /spec.jobClassName: Not found: JobClass "nope"/);
    assert.equal(
      check(job('j'), { ns: namespace('team-a', {}, { [NAMESPACE_DEFAULT_ANNOTATION]: 'gone' }) }).allowed,
      false,
    );
  });

  it('admits with a warning when no or several defaults exist (the controller reports it)', () => {
    const none = check(job('j'), { classes: [microvm] });
    assert.equal(none.allowed, true);
    assert.match(none.warnings?.[0] ?? '', /NoDefaultJobClass/);
    const two = check(job('j'), { classes: [rootless, jobClass('other', { isDefault: true })] });
    assert.match(two.warnings?.[0] ?? '', /AmbiguousDefaultJobClass/);
  });

  it('rejects a class the namespace may not use, and a terminating class', () => {
    const r = check(job('j', { jobClassName: 'microvm' }), { ns: namespace('team-a') });
    assert.deepEqual([r.allowed, r.code, r.reason], [false, 403, 'Forbidden']);
    const dying = { ...rootless, metadata: { ...rootless.metadata, deletionTimestamp: '2026-01-01T00:00:00Z' } };
    assert.equal(check(job('j', { jobClassName: 'rootless' }), { classes: [dying] }).allowed, false);
  });

  it('rejects resources outside the policy and request > limit', () => {
    const big = check(job('j', { resources: { limits: { cpu: '9' } } }));
    assert.deepEqual(
      [big.allowed, big.message],
      [false, 'spec.resources.limits.cpu 9 is above the JobClass maximum 8 (JobClass rootless)'],
    );
    assert.equal(
      check(job('j', { resources: { requests: { memory: '4Gi' }, limits: { memory: '3Gi' } } })).allowed,
      false,
    );
  });

  it('rejects Secret env and image auth that the OpenSandbox parameters do not allow', () => {
    const env = job('j', {
      jobClassName: 'microvm',
      env: [{ name: 'P', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } }],
    });
    assert.match(check(env, { params: osParams('microvm') }).message ?? '', /SecretEnvNotAllowed/);
    assert.equal(check(env, { params: osParams('microvm', { allowSecretEnv: true }) }).allowed, true);
    const pull = job('j', { jobClassName: 'microvm', imagePullSecret: { name: 'regcred' } });
    assert.match(check(pull, { params: osParams('microvm') }).message ?? '', /ImageAuthNotAllowed/);
    assert.equal(check(pull, { params: osParams('microvm', { allowImageAuth: true }) }).allowed, true);
    assert.match(
      check(job('j', { jobClassName: 'microvm', resources: { requests: { cpu: '1' } } }), {
        params: osParams('microvm', { mapping: 'Native' }),
      }).message ?? '',
      /ResourcesNotRepresentable/,
    );
  });

  it('lets Kubernetes classes use Secret env and pull secrets natively', () => {
    assert.equal(
      check(
        job('j', {
          env: [{ name: 'P', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } }],
          imagePullSecret: { name: 'r' },
        }),
      ).allowed,
      true,
    );
  });
});

describe('jobclass-admission handler', () => {
  const objects: Record<string, KubeObject> = {
    '/api/v1/namespaces/team-a': allowedNs,
    '/apis/execution.ayatori.ddupan.top/v1alpha1/jobclasses': { metadata: {}, items: [rootless, microvm] },
    '/apis/execution.ayatori.ddupan.top/v1alpha1/jobclasses/microvm': microvm,
    '/apis/execution.ayatori.ddupan.top/v1alpha1/opensandboxexecutionparameters/microvm': osParams('microvm'),
  };
  const ctx: AdmissionContext = {
    now: new Date(),
    signal: new AbortController().signal,
    post: () => Promise.reject(new Error('unused')),
    get: <T extends KubeObject>(path: string) => Promise.resolve(objects[path] as T | undefined),
  };
  const req = (object: KubeObject, operation: AdmissionRequest['operation'] = 'CREATE'): AdmissionRequest => ({
    uid: 'u',
    kind: { group: 'execution.ayatori.ddupan.top', version: 'v1alpha1', kind: 'Job' },
    resource: { group: 'execution.ayatori.ddupan.top', version: 'v1alpha1', resource: 'jobs' },
    namespace: 'team-a',
    operation,
    userInfo: { username: 'alice' },
    object,
  });

  it('reads the namespace, class and parameters it needs', async () => {
    assert.deepEqual(await admitJob(req(job('j')), ctx), { allowed: true });
    const env = job('j', {
      jobClassName: 'microvm',
      env: [{ name: 'P', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } }],
    });
    assert.equal((await admitJob(req(env), ctx)).allowed, false);
    assert.equal((await admitJob(req(job('j', { jobClassName: 'missing' })), ctx)).allowed, false);
  });

  it('fails closed when a lookup fails and ignores updates', async () => {
    const broken = { ...ctx, get: () => Promise.reject(new Error('apiserver unavailable')) };
    await assert.rejects(admitJob(req(job('j')), broken), /unavailable/);
    assert.deepEqual(await admitJob(req(job('j'), 'UPDATE'), broken), { allowed: true });
  });
});
