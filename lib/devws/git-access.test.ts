/** The Git Server's access rules (ADR 0026), pure: who a Node is, which repository it may read, where a sync may fetch. */
import assert from 'node:assert/strict';
import type { Workspace } from './api.ts';
import { authorizeNode, bearerToken, GitAccessError, nodeOf, ReviewCache, tokenDigest } from './git-access.ts';
import { checkAddress, parseCidr, parseCidrList, vetAddresses } from './sync-target.ts';

const ws = (project: string, sandbox: string, over: Partial<NonNullable<Workspace['status']>> = {}): Workspace => ({
  metadata: { name: `${project}-main`, namespace: 'team' },
  spec: { project, kind: 'main', desiredState: 'running' },
  status: { observedState: 'ready', sandbox: { id: sandbox, generation: 1, nodeId: 'n' }, ...over },
});
const reason = (f: () => unknown): string => {
  try {
    f();
  } catch (e) {
    if (e instanceof GitAccessError) return `${e.code} ${e.reason}`;
    throw e;
  }
  return 'allowed';
};

describe('devws Git Server access (pure)', () => {
  it('a Node is the kruntimes-devws-node ServiceAccount with a Pod-bound token; anything else is not', () => {
    const extra = { 'authentication.kubernetes.io/pod-name': ['sb-1'] };
    assert.deepEqual(nodeOf({ username: 'system:serviceaccount:team:kruntimes-devws-node', extra }), {
      namespace: 'team',
      pod: 'sb-1',
    });
    assert.equal(nodeOf({ username: 'system:serviceaccount:team:kruntimes-devws-node' }), undefined, 'not Pod-bound');
    assert.equal(nodeOf({ username: 'system:serviceaccount:team:default', extra }), undefined);
    assert.equal(nodeOf({ username: 'kruntimes-devws-node', extra }), undefined);
    assert.deepEqual(
      nodeOf({ username: 'system:serviceaccount:team:ws-sbx-0123' }),
      { namespace: 'team', pod: 'ws-sbx-0123' },
      "an OpenSandbox sandbox's Node: the ServiceAccount named by its instance ID",
    );
  });

  it('a Node reads only the Project whose Workspace has its Pod as the live sandbox', () => {
    const node = { namespace: 'team', pod: 'sb-1' };
    assert.equal(
      reason(() => authorizeNode(node, 'team', 'p1', [ws('p1', 'sb-1')])),
      'allowed',
    );
    assert.equal(
      reason(() => authorizeNode(node, 'team', 'p2', [ws('p1', 'sb-1'), ws('p2', 'sb-2')])),
      '403 repository_forbidden',
    );
    assert.equal(
      reason(() => authorizeNode(node, 'other', 'p1', [ws('p1', 'sb-1')])),
      '403 repository_forbidden',
    );
    const terminated = ws('p1', 'sb-1', { sandbox: { id: 'sb-1', generation: 1, nodeId: 'n', terminated: true } });
    assert.equal(
      reason(() => authorizeNode(node, 'team', 'p1', [terminated])),
      '403 repository_forbidden',
    );
    assert.equal(
      reason(() => authorizeNode(node, 'team', 'p1', [ws('p1', 'sb-1', { observedState: 'deleted' })])),
      '403 repository_forbidden',
    );
  });

  it('bearer tokens, digests and the review cache (bounded, expiring, keyed by digest)', () => {
    assert.equal(bearerToken('Bearer abc.def-_'), 'abc.def-_');
    assert.equal(bearerToken('Basic abc'), undefined);
    assert.equal(bearerToken('Bearer a b'), undefined);
    assert.match(tokenDigest('t'), /^[0-9a-f]{64}$/);
    let now = 0;
    const c = new ReviewCache<true>(1000, () => now, 2);
    c.set('a', true);
    assert.equal(c.get('a'), true);
    now = 1000;
    assert.equal(c.get('a'), undefined, 'expired');
    c.set('b', true);
    c.set('c', true);
    c.set('d', true);
    assert.deepEqual([c.get('b'), c.get('c'), c.get('d')], [undefined, true, true], 'the oldest is evicted');
  });

  it('sync targets: loopback, link-local, private, mapped and added ranges refused unless allow-listed', () => {
    const none = { allow: [], deny: [] };
    for (const ip of [
      '127.0.0.1',
      '169.254.169.254',
      '10.96.0.1',
      '172.20.1.1',
      '192.168.1.1',
      '100.64.0.1',
      '0.0.0.0',
      '::1',
      '::',
      'fe80::1',
      'fd00::1',
      '::ffff:127.0.0.1',
      '::ffff:a9fe:a9fe',
    ])
      assert.equal(
        reason(() => checkAddress(ip, none)),
        '403 sync_target_forbidden',
        ip,
      );
    for (const ip of ['140.82.121.4', '2606:50c0:8000::153'])
      assert.equal(
        reason(() => checkAddress(ip, none)),
        'allowed',
        ip,
      );
    assert.equal(
      reason(() => checkAddress('140.82.121.4', { allow: [], deny: parseCidrList('140.82.0.0/16') })),
      '403 sync_target_forbidden',
    );
    assert.equal(
      reason(() => checkAddress('127.0.0.1', { allow: parseCidrList('127.0.0.1/32'), deny: [] })),
      'allowed',
    );
    assert.equal(
      reason(() => checkAddress('127.0.0.2', { allow: parseCidrList('127.0.0.1'), deny: [] })),
      '403 sync_target_forbidden',
    );
    assert.equal(
      reason(() => vetAddresses('h', ['140.82.121.4', '10.0.0.1'], none)),
      '403 sync_target_forbidden',
      'any internal address refuses',
    );
    assert.equal(
      reason(() => vetAddresses('h', [], none)),
      '403 sync_target_forbidden',
    );
    assert.throws(() => parseCidr('10.0.0.0/33'));
    assert.throws(() => parseCidr('example.com/8'));
    assert.equal(parseCidr('10.1.2.3/8').base, parseCidr('10.0.0.0/8').base);
  });
});
