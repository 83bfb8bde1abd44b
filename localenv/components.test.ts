import assert from 'node:assert/strict';
import { parse } from 'yaml';
import { apiserverArgs, etcdArgs, kcmArgs, layout, schedulerArgs } from './components.ts';
import { renderKubeconfig } from './kubeconfig.ts';

const ports = { etcdClient: 20001, etcdPeer: 20002, apiserver: 20003, kcm: 20004, scheduler: 20005, nodes: [20006] };
const l = layout('/tmp/env');

describe('local environment component flags', () => {
  it('binds everything to loopback on the allocated ports, never default ports', () => {
    const all = [
      ...etcdArgs(l, ports),
      ...apiserverArgs(l, ports),
      ...kcmArgs(l, ports),
      ...schedulerArgs(l, ports),
    ].join(' ');
    for (const p of [':2379', ':2380', '=6443', '=10257', '=10259'])
      assert.ok(!all.includes(p), `default port ${p} used`);
    assert.ok(apiserverArgs(l, ports).includes('--bind-address=127.0.0.1'));
    assert.ok(apiserverArgs(l, ports).includes('--advertise-address=127.0.0.1'));
    assert.ok(apiserverArgs(l, ports).includes('--endpoint-reconciler-type=none'));
  });

  it('keeps aggregation routing off (ExternalName backends) and uses distinct client and front-proxy CAs', () => {
    const a = apiserverArgs(l, ports);
    assert.ok(a.includes('--enable-aggregator-routing=false'));
    assert.ok(a.includes('--client-ca-file=/tmp/env/pki/ca.crt'));
    assert.ok(a.includes('--requestheader-client-ca-file=/tmp/env/pki/front-proxy-ca.crt'));
    assert.ok(a.includes('--authorization-mode=Node,RBAC'));
  });

  it('renders a kubeconfig with one identity', () => {
    const kc = parse(
      renderKubeconfig({ server: 'https://127.0.0.1:1', caFile: '/ca', certFile: '/c', keyFile: '/k', user: 'u' }),
    ) as Record<string, unknown>;
    assert.equal(kc['current-context'], 'kruntimes-local');
    assert.deepEqual((kc.users as { user: unknown }[])[0]?.user, { 'client-certificate': '/c', 'client-key': '/k' });
  });
});
