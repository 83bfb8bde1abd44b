import assert from 'node:assert/strict';
import { pino } from 'pino';
import { admissionRouter, decide, reviewResponse } from './admission.ts';
import { functionUser } from './functions.ts';
import { KubeClient } from '../lib/kube/client.ts';
import { FnMetrics } from '../lib/fn/metrics.ts';
import type { AdmissionFunction, AdmissionRequest } from '../lib/fn/types.ts';
import { checkOwner } from '../e2e/fixtures/functions/sample-policy/index.ts';

const req: AdmissionRequest = {
  uid: 'u1',
  kind: { group: '', version: 'v1', kind: 'ConfigMap' },
  resource: { group: '', version: 'v1', resource: 'configmaps' },
  operation: 'CREATE',
  userInfo: { username: 'alice' },
  namespace: 'ns',
  name: 'x',
  object: { metadata: { name: 'x', labels: { 'kruntimes.io/sample': 'policy' } } },
};
const fnWith = (handler: AdmissionFunction['handler']): AdmissionFunction => ({
  name: 't',
  description: '',
  rbac: [],
  handler,
  trigger: { type: 'admission', webhook: 'validating', rules: [], timeoutSeconds: 1, failurePolicy: 'Fail' },
});
const ctx = { now: new Date(0), post: () => Promise.reject(new Error('no')), get: () => Promise.resolve(undefined) };

describe('admission router', () => {
  it('denies (fail closed) when the handler misses its deadline', async () => {
    const r = await decide(
      fnWith(() => new Promise(() => undefined)),
      req,
      ctx,
      20,
    );
    assert.equal(r.allowed, false);
    assert.equal(r.code, 504);
    assert.match(r.message ?? '', /did not finish within 20 ms/);
  });

  it('denies with the error when the handler throws', async () => {
    const r = await decide(
      fnWith(() => {
        throw new Error('boom');
      }),
      req,
      ctx,
      1000,
    );
    assert.deepEqual([r.allowed, r.code], [false, 500]);
    assert.match(r.message ?? '', /admission check failed: boom/);
  });

  it('renders AdmissionReview responses with status, warnings and base64 JSON patches', () => {
    const denied = reviewResponse('u1', { allowed: false, code: 422, reason: 'Invalid', message: 'm' })
      .response as Record<string, unknown>;
    assert.deepEqual(denied, { uid: 'u1', allowed: false, status: { code: 422, reason: 'Invalid', message: 'm' } });
    const patched = reviewResponse('u2', {
      allowed: true,
      warnings: ['w'],
      patch: [{ op: 'add', path: '/x', value: 1 }],
    }).response as Record<string, string>;
    assert.equal(patched.patchType, 'JSONPatch');
    assert.deepEqual(JSON.parse(Buffer.from(patched.patch ?? '', 'base64').toString()), [
      { op: 'add', path: '/x', value: 1 },
    ]);
  });

  it('sample-policy requires data.owner on labelled ConfigMaps only', () => {
    assert.equal(checkOwner(req).allowed, false);
    assert.equal(checkOwner({ ...req, object: { metadata: { name: 'x' } } }).allowed, true);
    assert.equal(checkOwner({ ...req, object: { ...req.object!, data: { owner: 'a' } } }).allowed, true);
  });

  it("makes each function's API calls through its own client: the function's ServiceAccount", () => {
    const asked: string[] = [];
    const server = new KubeClient({ server: 'https://127.0.0.1:6443' });
    admissionRouter(
      [fnWith(() => ({ allowed: true })), { ...fnWith(() => ({ allowed: true })), name: 'u' }],
      (fn) => {
        asked.push(fn.name);
        return server.as(functionUser('kruntimes-system', fn.name));
      },
      pino({ level: 'silent' }),
      new FnMetrics(),
    );
    assert.deepEqual(asked, ['t', 'u']);
    assert.equal(functionUser('kruntimes-system', 't'), 'system:serviceaccount:kruntimes-system:kruntimes-fn-t');
  });
});

describe('admission functions read the informer cache only within their own rules', () => {
  it('rulesAllowGet: group, resource, the get verb and resourceNames', async () => {
    const { rulesAllowGet } = await import('./admission.ts');
    const { R } = await import('../lib/fn/resources.ts');
    const rules = [
      { apiGroups: ['kruntimes.io'], resources: ['persistentworkspaces', 'workflowruns'], verbs: ['get'] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['get'], resourceNames: ['one'] },
      { apiGroups: ['kruntimes.io'], resources: ['runs'], verbs: ['list'] },
    ];
    assert.equal(rulesAllowGet(rules, R.persistentWorkspaces, 'w'), true);
    assert.equal(rulesAllowGet(rules, R.workflowRuns, 'w'), true);
    assert.equal(rulesAllowGet(rules, R.runs, 'r'), false, 'list is not get');
    assert.equal(rulesAllowGet(rules, R.pods, 'p'), false);
    assert.equal(rulesAllowGet(rules, R.secrets, 'one'), true);
    assert.equal(rulesAllowGet(rules, R.secrets, 'two'), false, 'outside resourceNames');
  });
});
