import assert from 'node:assert/strict';
import { canAcquire } from './leader.ts';
import { matchesLabels } from './relay.ts';
import { localizePorts } from '../localenv/install.ts';

describe('leader election, relay selectors, local install', () => {
  const now = new Date('2026-01-01T00:01:00Z');
  it('takes a lease only when free, expired or already held', () => {
    assert.ok(canAcquire(undefined, 'me', now));
    assert.ok(
      canAcquire(
        { metadata: {}, spec: { holderIdentity: 'me', renewTime: now.toISOString(), leaseDurationSeconds: 15 } },
        'me',
        now,
      ),
    );
    assert.ok(
      !canAcquire(
        {
          metadata: {},
          spec: { holderIdentity: 'other', renewTime: '2026-01-01T00:00:50Z', leaseDurationSeconds: 15 },
        },
        'me',
        now,
      ),
    );
    assert.ok(
      canAcquire(
        {
          metadata: {},
          spec: { holderIdentity: 'other', renewTime: '2026-01-01T00:00:40Z', leaseDurationSeconds: 15 },
        },
        'me',
        now,
      ),
    );
    assert.ok(canAcquire({ metadata: {}, spec: { holderIdentity: '' } }, 'me', now));
  });

  it('matches equality label selectors', () => {
    assert.ok(matchesLabels({ metadata: { labels: { a: '1', b: '2' } } }, { a: '1' }));
    assert.ok(!matchesLabels({ metadata: { labels: { a: '2' } } }, { a: '1' }));
    assert.ok(matchesLabels({ metadata: {} }, undefined));
  });

  it('points webhook and APIService service references and the server at the environment port', () => {
    const docs = localizePorts(
      [
        {
          kind: 'ValidatingWebhookConfiguration',
          metadata: { name: 'k' },
          webhooks: [
            { clientConfig: { service: { name: 'kruntimes-extension', namespace: 'kruntimes-system', port: 443 } } },
            { clientConfig: { service: { name: 'other', namespace: 'x', port: 443 } } },
          ],
        },
        {
          kind: 'APIService',
          metadata: { name: 'a' },
          spec: { service: { name: 'kruntimes-extension', namespace: 'kruntimes-system', port: 443 } },
        },
        {
          kind: 'Deployment',
          metadata: { name: 'kruntimes-extension' },
          spec: { template: { spec: { containers: [{ env: [{ name: 'A', value: '1' }] }] } } },
        },
      ],
      12345,
    );
    const [wh, api, dep] = docs as unknown as [
      { webhooks: { clientConfig: { service: { port: number } } }[] },
      { spec: { service: { port: number } } },
      { spec: { template: { spec: { containers: { env: { name: string; value: string }[] }[] } } } },
    ];
    assert.equal(wh.webhooks[0]?.clientConfig.service.port, 12345);
    assert.equal(wh.webhooks[1]?.clientConfig.service.port, 443);
    assert.equal(api.spec.service.port, 12345);
    assert.deepEqual(dep.spec.template.spec.containers[0]?.env, [
      { name: 'A', value: '1' },
      { name: 'KRT_HTTPS_PORT', value: '12345' },
    ]);
  });
});

describe('relay read-your-writes helpers', () => {
  it('compares resourceVersions numerically and parses equality selectors', async () => {
    const { rvAtLeast, selectorMatches } = await import('./relay.ts');
    assert.ok(rvAtLeast('10', '9'));
    assert.ok(!rvAtLeast('9', '10'));
    assert.ok(!rvAtLeast(undefined, '1'));
    assert.equal(selectorMatches('a=1,b', { a: '1', b: 'x' }), true);
    assert.equal(selectorMatches('a=1', { a: '2' }), false);
    assert.equal(selectorMatches('a!=1,!c', { a: '2' }), true);
    assert.equal(selectorMatches('a in (1,2)', { a: '1' }), undefined);
  });
});

describe('relay state with several informers of one kind', () => {
  it('prefers the newest resourceVersion', async () => {
    const { newer } = await import('./relay.ts');
    const o = (rv: string): { metadata: { resourceVersion: string } } => ({ metadata: { resourceVersion: rv } });
    assert.ok(newer(o('12'), o('9')));
    assert.ok(!newer(o('9'), o('12')));
    assert.ok(!newer(o('12'), o('12')));
  });
});
