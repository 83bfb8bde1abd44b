import assert from 'node:assert/strict';
import type { AdmissionContext, AdmissionRequest } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { job } from '../../lib/jobclass/testing.ts';
import { jobReferences, referenceAccess } from './access.ts';

interface Sar {
  spec: {
    user: string;
    groups: string[];
    extra: Record<string, string[]>;
    resourceAttributes: { namespace: string; verb: string; resource: string; name: string };
  };
}

const withRefs = job('j', {
  env: [
    { name: 'A', valueFrom: { secretKeyRef: { name: 'db', key: 'password' } } },
    { name: 'B', valueFrom: { configMapKeyRef: { name: 'settings', key: 'x' } } },
    { name: 'C', valueFrom: { secretKeyRef: { name: 'db', key: 'user' } } },
    { name: 'D', value: 'plain' },
  ],
  imagePullSecret: { name: 'registry' },
});

function ctxAllowing(readable: string[], seen: Sar[] = []): AdmissionContext {
  return {
    now: new Date(),
    signal: new AbortController().signal,
    post: <T>(_path: string, body: unknown) => {
      const sar = body as Sar;
      seen.push(sar);
      const a = sar.spec.resourceAttributes;
      return Promise.resolve({ status: { allowed: readable.includes(`${a.resource}/${a.name}`) } } as T);
    },
    get: <T extends KubeObject>() => Promise.resolve(undefined as T | undefined),
  };
}

const req: AdmissionRequest = {
  uid: 'u',
  kind: { group: 'execution.ayatori.ddupan.top', version: 'v1alpha1', kind: 'Job' },
  resource: { group: 'execution.ayatori.ddupan.top', version: 'v1alpha1', resource: 'jobs' },
  namespace: 'team-a',
  operation: 'CREATE',
  userInfo: { username: 'mallory', uid: '42', groups: ['dev'], extra: { scopes: ['x'] } },
};

describe('jobclass-admission: referenced Secrets and ConfigMaps', () => {
  it('lists each distinct Secret and ConfigMap once, with the first field naming it', () => {
    assert.deepEqual(jobReferences(withRefs), [
      { resource: 'secrets', name: 'db', field: 'spec.env[0].valueFrom.secretKeyRef.name' },
      { resource: 'configmaps', name: 'settings', field: 'spec.env[1].valueFrom.configMapKeyRef.name' },
      { resource: 'secrets', name: 'registry', field: 'spec.imagePullSecret.name' },
    ]);
  });

  it('asks one SubjectAccessReview per reference for the requesting user and admits when all are readable', async () => {
    const seen: Sar[] = [];
    const ctx = ctxAllowing(['secrets/db', 'configmaps/settings', 'secrets/registry'], seen);
    assert.equal(await referenceAccess(req, withRefs, ctx), undefined);
    assert.equal(seen.length, 3);
    assert.deepEqual(
      seen.map((s) => [s.spec.user, s.spec.groups, s.spec.extra, s.spec.resourceAttributes.verb]),
      Array(3).fill(['mallory', ['dev'], { scopes: ['x'] }, 'get']),
    );
    assert.ok(seen.every((s) => s.spec.resourceAttributes.namespace === 'team-a'));
  });

  it('denies a Job naming a Secret its creator may not read, naming the field', async () => {
    const r = await referenceAccess(req, withRefs, ctxAllowing(['secrets/db', 'configmaps/settings']));
    assert.equal(r?.allowed, false);
    assert.equal(r.code, 403);
    assert.equal(r.reason, 'Forbidden');
    assert.match(
      r.message ?? '',
      /^spec\.imagePullSecret\.name: mallory may not get Secret "registry" in namespace team-a/,
    );
  });

  it('fails closed when the review cannot be made', async () => {
    const broken = { ...ctxAllowing([]), post: () => Promise.reject(new Error('connection refused')) };
    const r = await referenceAccess(req, withRefs, broken);
    assert.equal(r?.allowed, false);
    assert.equal(r.code, 503);
    assert.match(r.message ?? '', /connection refused/);
  });

  it('asks nothing for a Job without references', async () => {
    const seen: Sar[] = [];
    assert.equal(await referenceAccess(req, job('plain'), ctxAllowing([], seen)), undefined);
    assert.equal(seen.length, 0);
  });
});
