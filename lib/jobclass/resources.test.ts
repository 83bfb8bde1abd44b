import assert from 'node:assert/strict';
import { policyProblem, resolveResources, sameQuantity } from './resources.ts';
import type { ResourcePolicy } from './api.ts';

// The seed's rootless example policy.
const rootless: ResourcePolicy = {
  defaults: { requests: { cpu: '250m', memory: '256Mi' }, limits: { cpu: '2', memory: '2Gi' } },
  maximum: { limits: { cpu: '8', memory: '16Gi' } },
};

describe('jobclass resource policy', () => {
  it('fills unset values from the class defaults (rule 1) and keeps Job values', () => {
    assert.deepEqual(resolveResources(undefined, rootless), { ok: true, effective: rootless.defaults });
    const r = resolveResources({ requests: { cpu: '500m' }, limits: { memory: '4Gi' } }, rootless);
    assert.deepEqual(r, {
      ok: true,
      effective: { requests: { cpu: '500m', memory: '256Mi' }, limits: { cpu: '2', memory: '4Gi' } },
    });
  });

  it('enforces minimum and maximum on the resolved values (rule 2)', () => {
    const over = resolveResources({ limits: { cpu: '9' } }, rootless);
    assert.deepEqual(over, {
      ok: false,
      reason: 'ResourcesOutOfPolicy',
      message: 'spec.resources.limits.cpu 9 is above the JobClass maximum 8',
    });
    const policy: ResourcePolicy = { minimum: { requests: { memory: '128Mi' } } };
    const under = resolveResources({ requests: { memory: '64Mi' } }, policy);
    assert.equal(under.ok, false);
    assert.match(!under.ok ? under.message : '', /below the JobClass minimum 128Mi/);
  });

  it('requires a value when a bound exists for it (no unbounded limit under a maximum)', () => {
    const r = resolveResources(undefined, { maximum: { limits: { cpu: '8' } } });
    assert.deepEqual(r, {
      ok: false,
      reason: 'ResourcesOutOfPolicy',
      message: 'spec.resources.limits.cpu must be set: the JobClass maximum.limits.cpu is 8',
    });
  });

  it('rejects request > limit (rule 3) when both are explicit', () => {
    const r = resolveResources({ requests: { cpu: '3' }, limits: { cpu: '2' } }, rootless);
    assert.deepEqual(r, {
      ok: false,
      reason: 'InvalidResources',
      message: 'spec.resources.requests.cpu 3 must not exceed spec.resources.limits.cpu 2',
    });
  });

  it('never lets a default create request > limit: a defaulted request is capped, a defaulted limit raised', () => {
    const capped = resolveResources({ limits: { cpu: '100m' } }, rootless);
    assert.deepEqual(capped.ok && capped.effective.requests, { cpu: '100m', memory: '256Mi' });
    const raised = resolveResources({ requests: { memory: '3Gi' } }, rootless);
    assert.deepEqual(raised.ok && raised.effective.limits, { cpu: '2', memory: '3Gi' });
  });

  it('compares quantities exactly at the boundaries', () => {
    const policy: ResourcePolicy = {
      maximum: { limits: { cpu: '1', memory: '1Gi' } },
      minimum: { requests: { cpu: '500m' } },
    };
    assert.equal(
      resolveResources({ requests: { cpu: '0.5' }, limits: { cpu: '1000m', memory: '1024Mi' } }, policy).ok,
      true,
      '0.5 == 500m, 1000m == 1, 1024Mi == 1Gi',
    );
    assert.equal(
      resolveResources({ requests: { cpu: '499m' }, limits: { cpu: '1', memory: '1Gi' } }, policy).ok,
      false,
    );
    assert.equal(
      resolveResources({ requests: { cpu: '500m' }, limits: { cpu: '1001m', memory: '1Gi' } }, policy).ok,
      false,
    );
    assert.equal(
      resolveResources({ requests: { cpu: '500m' }, limits: { cpu: '1', memory: '1073741825' } }, policy).ok,
      false,
      'one byte over 1Gi',
    );
    assert.equal(
      resolveResources({ requests: { cpu: '500m' }, limits: { cpu: '1', memory: '1e9' } }, policy).ok,
      true,
      '1e9 < 1Gi',
    );
  });

  it('rejects malformed and negative quantities', () => {
    assert.deepEqual(resolveResources({ requests: { cpu: 'lots' } }, undefined), {
      ok: false,
      reason: 'InvalidResources',
      message: 'spec.resources.requests.cpu "lots" is not a quantity',
    });
    assert.equal(resolveResources({ limits: { memory: '-1Gi' } }, undefined).ok, false);
  });

  it('writes only what is set: no policy and no values resolves to nothing', () => {
    assert.deepEqual(resolveResources(undefined, undefined), { ok: true, effective: {} });
  });

  it('finds self-inconsistent policies (InvalidResourcePolicy)', () => {
    assert.equal(policyProblem(rootless), undefined);
    assert.match(
      policyProblem({ defaults: { requests: { cpu: '4' }, limits: { cpu: '2' } } }) ?? '',
      /defaults.requests.cpu \(4\) must not exceed spec.resources.defaults.limits.cpu \(2\)/,
    );
    assert.match(
      policyProblem({ minimum: { limits: { memory: '2Gi' } }, maximum: { limits: { memory: '1Gi' } } }) ?? '',
      /minimum.limits.memory/,
    );
    assert.match(
      policyProblem({ defaults: { limits: { cpu: '16' } }, maximum: { limits: { cpu: '8' } } }) ?? '',
      /defaults.limits.cpu \(16\) must not exceed spec.resources.maximum.limits.cpu/,
    );
    assert.match(
      policyProblem({ minimum: { requests: { cpu: '4' } }, maximum: { limits: { cpu: '2' } } }) ?? '',
      /unsatisfiable|minimum.requests.cpu/,
    );
    assert.match(policyProblem({ defaults: { requests: { cpu: 'x' } } }) ?? '', /not a quantity/);
  });

  it('sameQuantity compares numerically', () => {
    assert.ok(sameQuantity('1Gi', '1024Mi'));
    assert.ok(!sameQuantity('1G', '1Gi'));
    assert.ok(!sameQuantity('1', undefined));
  });
});
