import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { desiredMaterial, rotate, SECRET, NAMESPACE } from './index.ts';
import { notAfter, splitBundle } from '../../lib/tls/certs.ts';
import type { State } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';

const DAY = 86_400_000;
const b64 = (s: string): string => Buffer.from(s).toString('base64');
function secretOf(
  m: Awaited<ReturnType<typeof desiredMaterial>>['material'],
): KubeObject & { data: Record<string, string> } {
  return {
    metadata: { name: SECRET, namespace: NAMESPACE },
    data: {
      'tls.crt': b64(m.serving.cert),
      'tls.key': b64(m.serving.key),
      'functions.crt': b64(m.functions.cert),
      'functions.key': b64(m.functions.key),
      'dashboard.crt': b64(m.dashboard.cert),
      'dashboard.key': b64(m.dashboard.key),
      'git.crt': b64(m.git.cert),
      'git.key': b64(m.git.key),
      'ca.crt': b64(m.ca.cert),
      'ca.key': b64(m.ca.key),
      'ca-bundle.crt': b64(m.caBundle),
    },
  };
}

describe('tls-certificates function', () => {
  const t0 = new Date('2027-01-01T00:00:00Z');

  it('issues a CA and a serving certificate for the Service and localhost, verifiable by the CA', async () => {
    const { material, changed } = await desiredMaterial(undefined, t0);
    assert.ok(changed);
    const leaf = new X509Certificate(material.serving.cert);
    const ca = new X509Certificate(material.ca.cert);
    assert.ok(leaf.verify(ca.publicKey));
    assert.match(leaf.subjectAltName ?? '', /DNS:kruntimes-extension\.kruntimes-system\.svc/);
    assert.match(leaf.subjectAltName ?? '', /IP Address:127\.0\.0\.1/);
    const fnLeaf = new X509Certificate(material.functions.cert);
    assert.ok(fnLeaf.verify(ca.publicKey));
    assert.ok(fnLeaf.checkHost('kruntimes-fn-run-scheduler.kruntimes-system.svc'), 'any Service of the namespace');
    assert.equal(fnLeaf.checkHost('kruntimes-fn-run-scheduler.other.svc'), undefined, 'no other namespace');
  });

  it('adds the function servers certificate to an existing Secret without touching the rest', async () => {
    const first = (await desiredMaterial(undefined, t0)).material;
    const old = secretOf(first);
    delete old.data['functions.crt'];
    delete old.data['functions.key'];
    const next = await desiredMaterial(old, new Date(t0.getTime() + DAY));
    assert.ok(next.changed);
    assert.equal(next.material.serving.cert, first.serving.cert);
    assert.equal(next.material.ca.cert, first.ca.cert);
  });

  it("issues the dashboard's certificate for its Service only, and adds it to an existing Secret", async () => {
    const first = (await desiredMaterial(undefined, t0)).material;
    const leaf = new X509Certificate(first.dashboard.cert);
    assert.ok(leaf.verify(new X509Certificate(first.ca.cert).publicKey));
    assert.ok(leaf.checkHost('kruntimes-dashboard.kruntimes-system.svc'));
    assert.ok(leaf.checkHost('kruntimes-dashboard.kruntimes-system.svc.cluster.local'));
    assert.equal(leaf.checkHost('kruntimes-fn-run-scheduler.kruntimes-system.svc'), undefined, 'no other Service');
    assert.equal(leaf.checkIP('127.0.0.1'), undefined);
    assert.notEqual(first.dashboard.key, first.functions.key, 'a key of its own');
    const old = secretOf(first);
    delete old.data['dashboard.crt'];
    delete old.data['dashboard.key'];
    const next = await desiredMaterial(old, new Date(t0.getTime() + DAY));
    assert.ok(next.changed);
    assert.deepEqual(
      [next.material.serving.cert, next.material.functions.cert, next.material.ca.cert],
      [first.serving.cert, first.functions.cert, first.ca.cert],
    );
    assert.ok(new X509Certificate(next.material.dashboard.cert).verify(new X509Certificate(first.ca.cert).publicKey));
    const applied = await rotate({
      state: { get: () => old, list: () => [] },
      now: new Date(t0.getTime() + DAY),
    });
    const data = (applied[0] as unknown as { object: { data: Record<string, string> } }).object.data;
    assert.ok(data['dashboard.crt'] && data['dashboard.key'], 'the Secret carries the dashboard pair');
  });

  it("issues the devws Git Server's certificate for its Service and localhost, and adds it to an existing Secret", async () => {
    const first = (await desiredMaterial(undefined, t0)).material;
    const leaf = new X509Certificate(first.git.cert);
    assert.ok(leaf.verify(new X509Certificate(first.ca.cert).publicKey));
    for (const name of [
      'kruntimes-devws-git.kruntimes-system.svc',
      'kruntimes-devws-git.kruntimes-system.svc.cluster.local',
      'localhost',
    ])
      assert.ok(leaf.checkHost(name), name);
    assert.equal(leaf.checkHost('kruntimes-extension.kruntimes-system.svc'), undefined, 'no other Service');
    assert.notEqual(first.git.key, first.dashboard.key, 'a key of its own');
    const old = secretOf(first);
    delete old.data['git.crt'];
    delete old.data['git.key'];
    const applied = await rotate({ state: { get: () => old, list: () => [] }, now: new Date(t0.getTime() + DAY) });
    const data = (applied[0] as unknown as { object: { data: Record<string, string> } }).object.data;
    assert.ok(data['git.crt'] && data['git.key'], 'the Secret carries the Git Server pair');
    assert.deepEqual([data['tls.crt'], data['ca.crt']], [old.data['tls.crt'], old.data['ca.crt']], 'the rest kept');
  });

  it('keeps valid material, renews the leaf 30 days before expiry, and keeps the old CA in the bundle while it is valid', async () => {
    const first = (await desiredMaterial(undefined, t0)).material;
    const again = await desiredMaterial(secretOf(first), new Date(t0.getTime() + 10 * DAY));
    assert.equal(again.changed, false);
    const leafRenewal = await desiredMaterial(
      secretOf(first),
      new Date(notAfter(first.serving.cert).getTime() - 10 * DAY),
    );
    assert.ok(leafRenewal.changed);
    assert.equal(leafRenewal.material.ca.cert, first.ca.cert, 'same CA');
    assert.notEqual(leafRenewal.material.serving.cert, first.serving.cert);
    assert.notEqual(leafRenewal.material.dashboard.cert, first.dashboard.cert, 'the dashboard leaf renewed too');
    const caTime = new Date(notAfter(first.ca.cert).getTime() - 30 * DAY);
    const caRenewal = await desiredMaterial(secretOf(first), caTime);
    assert.notEqual(caRenewal.material.ca.cert, first.ca.cert);
    const newCa = new X509Certificate(caRenewal.material.ca.cert).publicKey;
    assert.ok(new X509Certificate(caRenewal.material.dashboard.cert).verify(newCa), 'reissued by the new CA');
    assert.equal(splitBundle(caRenewal.material.caBundle).length, 2, 'old and new CA both trusted during rotation');
    const later = await desiredMaterial(
      secretOf(caRenewal.material),
      new Date(notAfter(first.ca.cert).getTime() + DAY),
    );
    assert.equal(splitBundle(later.material.caBundle).length, 1, 'expired CA dropped');
  });

  it('patches only the caBundles that differ, and only of the objects it declares', async () => {
    const first = (await desiredMaterial(undefined, t0)).material;
    const want = b64(first.caBundle);
    const objs: Record<string, KubeObject[]> = {
      validatingwebhookconfigurations: [
        { metadata: { name: 'kruntimes' }, webhooks: [{ clientConfig: { caBundle: want } }, { clientConfig: {} }] },
        { metadata: { name: 'someone-else' }, webhooks: [{ clientConfig: {} }] },
      ],
      apiservices: [
        { metadata: { name: 'v1alpha1.logs.kruntimes.io' }, spec: { caBundle: want } },
        { metadata: { name: 'v1beta1.metrics.k8s.io' }, spec: {} },
      ],
    };
    const state: State = {
      get: (r, _ns, name) => (r.resource === 'secrets' && name === SECRET ? secretOf(first) : undefined),
      list: (r) => objs[r.resource] ?? [],
    };
    const ops = await rotate({ state, now: new Date(t0.getTime() + DAY) });
    assert.deepEqual(
      ops.map((o) => o.op),
      ['patch'],
    );
    assert.deepEqual((ops[0] as { patch: unknown }).patch, [
      { op: 'add', path: '/webhooks/1/clientConfig/caBundle', value: want },
    ]);
  });
});
