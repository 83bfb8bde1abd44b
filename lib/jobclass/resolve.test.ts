import assert from 'node:assert/strict';
import { NAMESPACE_DEFAULT_ANNOTATION } from './api.ts';
import { imageAuthFrom, referenceProblem, registryOf, resolveEnv } from './envrefs.ts';
import { freeze, frozenClassProblem, frozenParametersProblem, namespaceAllowed, resolveClass } from './resolve.ts';
import { conditionEvents, stableJson } from './events.ts';
import { FakeState, R, configMap, job, jobClass, k8sParams, namespace, secret } from './testing.ts';

describe('jobclass resolution', () => {
  const classes = [jobClass('explicit'), jobClass('ns-default'), jobClass('global', { isDefault: true })];
  const ns = namespace('team-a', {}, { [NAMESPACE_DEFAULT_ANNOTATION]: 'ns-default' });

  it('prefers spec.jobClassName, then the namespace annotation, then the single global default', () => {
    assert.equal(
      (resolveClass('explicit', ns, classes) as { cls: { metadata: { name: string } } }).cls.metadata.name,
      'explicit',
    );
    const viaNs = resolveClass(undefined, ns, classes);
    assert.deepEqual([viaNs.kind, viaNs.kind === 'resolved' && viaNs.via], ['resolved', 'namespace']);
    const viaGlobal = resolveClass(undefined, namespace('team-b'), classes);
    assert.deepEqual(
      [viaGlobal.kind, viaGlobal.kind === 'resolved' && viaGlobal.cls.metadata.name],
      ['resolved', 'global'],
    );
  });

  it('reports an explicit or namespace-named class that does not exist (never falls back)', () => {
    assert.deepEqual(resolveClass('nope', ns, classes), { kind: 'notFound', name: 'nope', via: 'explicit' });
    const missing = namespace('team-c', {}, { [NAMESPACE_DEFAULT_ANNOTATION]: 'gone' });
    assert.deepEqual(resolveClass(undefined, missing, classes), { kind: 'notFound', name: 'gone', via: 'namespace' });
  });

  it('has no default with zero global defaults and refuses to pick among several', () => {
    assert.deepEqual(resolveClass(undefined, namespace('x'), [jobClass('a')]), { kind: 'none' });
    const two = [jobClass('b', { isDefault: true }), jobClass('a', { isDefault: true })];
    assert.deepEqual(resolveClass(undefined, namespace('x'), two), { kind: 'ambiguous', names: ['a', 'b'] });
    const terminating = {
      ...jobClass('c', { isDefault: true }),
      metadata: {
        ...jobClass('c').metadata,
        annotations: { 'execution.ayatori.ddupan.top/is-default-job-class': 'true' },
        deletionTimestamp: '2026-01-01T00:00:00Z',
      },
    };
    assert.equal(
      resolveClass(undefined, namespace('x'), [jobClass('a', { isDefault: true }), terminating]).kind,
      'resolved',
      'a terminating class is no default',
    );
  });

  it('freezes class and parameters UIDs and detects recreation under the same name', () => {
    const frozen = freeze(jobClass('rootless'), k8sParams('rootless'));
    assert.deepEqual(frozen, {
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
    assert.equal(frozenClassProblem(frozen, jobClass('rootless')), undefined);
    assert.equal(frozenClassProblem(frozen, jobClass('rootless', { uid: 'new' }))?.reason, 'JobClassReplaced');
    assert.equal(frozenClassProblem(frozen, undefined)?.reason, 'JobClassNotFound');
    assert.equal(frozenParametersProblem(frozen, k8sParams('rootless', { uid: 'new' }))?.reason, 'ParametersReplaced');
    assert.equal(frozenParametersProblem(frozen, undefined)?.reason, 'ParametersNotFound');
  });

  it('matches allowedNamespaces against namespace labels (omitted: all namespaces)', () => {
    const cls = jobClass('microvm', { allowed: { 'ayatori.ddupan.top/microvm-access': 'true' } });
    assert.ok(namespaceAllowed(cls, namespace('a', { 'ayatori.ddupan.top/microvm-access': 'true' })));
    assert.ok(!namespaceAllowed(cls, namespace('b')));
    assert.ok(!namespaceAllowed(cls, undefined));
    assert.ok(namespaceAllowed(jobClass('open'), namespace('b')));
  });
});

describe('jobclass env references', () => {
  const state = new FakeState([
    [R.secrets, secret('team-a', 'db', { password: 's3cret' })],
    [R.configMaps, configMap('team-a', 'cfg', { mode: 'fast' })],
  ]);

  it('resolves values with optional semantics and reports missing required references', () => {
    const j = job('j', {
      env: [
        { name: 'A', value: '1' },
        { name: 'P', valueFrom: { secretKeyRef: { name: 'db', key: 'password' } } },
        { name: 'M', valueFrom: { configMapKeyRef: { name: 'cfg', key: 'mode' } } },
        { name: 'O', valueFrom: { secretKeyRef: { name: 'missing', key: 'x', optional: true } } },
        { name: 'K', valueFrom: { configMapKeyRef: { name: 'cfg', key: 'nokey', optional: true } } },
      ],
    });
    assert.deepEqual(resolveEnv(j, state), { ok: true, env: { A: '1', P: 's3cret', M: 'fast' } });
    assert.equal(referenceProblem(j, state), undefined);
    const bad = job('j', { env: [{ name: 'P', valueFrom: { secretKeyRef: { name: 'db', key: 'nope' } } }] });
    assert.equal(referenceProblem(bad, state)?.reason, 'SecretKeyNotFound');
    assert.equal(
      referenceProblem(
        job('j', { env: [{ name: 'M', valueFrom: { configMapKeyRef: { name: 'x', key: 'y' } } }] }),
        state,
      )?.reason,
      'ConfigMapNotFound',
    );
    assert.equal(
      referenceProblem(job('j', { imagePullSecret: { name: 'regcred' } }), state)?.reason,
      'ImagePullSecretNotFound',
    );
  });

  it('finds registry credentials in a dockerconfigjson Secret', () => {
    assert.equal(registryOf('python:3.11'), 'docker.io');
    assert.equal(registryOf('registry.example.com:5000/app:1'), 'registry.example.com:5000');
    const cfg = JSON.stringify({
      auths: {
        'https://index.docker.io/v1/': { auth: Buffer.from('u:p:w').toString('base64') },
        'ghcr.io': { username: 'gh', password: 'tok' },
      },
    });
    const s = secret('team-a', 'regcred', { '.dockerconfigjson': cfg }, 'kubernetes.io/dockerconfigjson');
    assert.deepEqual(imageAuthFrom(s as never, 'python:3.11'), { ok: true, username: 'u', password: 'p:w' });
    assert.deepEqual(imageAuthFrom(s as never, 'ghcr.io/o/i:1'), { ok: true, username: 'gh', password: 'tok' });
    assert.equal(
      (imageAuthFrom(s as never, 'quay.io/o/i') as { problem: { reason: string } }).problem.reason,
      'ImageAuthNotFound',
    );
    assert.equal(
      (imageAuthFrom(secret('team-a', 'x', {}) as never, 'python') as { problem: { reason: string } }).problem.reason,
      'InvalidImagePullSecret',
    );
  });
});

describe('jobclass events', () => {
  it('emits one Event per condition status or reason change, Warning for failures', () => {
    const prev = [
      {
        type: 'Accepted',
        status: 'False' as const,
        reason: 'NoDefaultJobClass',
        message: '',
        lastTransitionTime: 't0',
      },
    ];
    const next = [
      { type: 'Accepted', status: 'True' as const, reason: 'Accepted', message: 'ok', lastTransitionTime: 't1' },
      { type: 'Failed', status: 'True' as const, reason: 'Cancelled', message: 'x', lastTransitionTime: 't1' },
    ];
    const ev = conditionEvents(prev, next);
    assert.deepEqual(
      ev.map((e) => [e.type, e.reason]),
      [
        ['Normal', 'Accepted'],
        ['Warning', 'Cancelled'],
      ],
    );
    assert.deepEqual(conditionEvents(next, next), []);
  });

  it('stableJson ignores key order and undefined values', () => {
    assert.equal(stableJson({ b: 1, a: [{ y: 2, x: undefined }] }), stableJson({ a: [{ y: 2 }], b: 1 }));
  });
});
