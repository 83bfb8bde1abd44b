import assert from 'node:assert/strict';
import fc from 'fast-check';
import { LoopbackIPAM } from './ip.ts';
import { ProbeState } from './probes.ts';
import { volumeFor, wantsVolume, PROVISIONER } from './provisioner.ts';

describe('node agent IPAM, probes and provisioner decisions', () => {
  it('gives every live Pod a distinct loopback IP outside 127.0.0.0/24, stable per UID', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.uuid(), { maxLength: 200 }), (uids) => {
        const ipam = new LoopbackIPAM();
        const ips = uids.map((u) => ipam.allocate(u));
        assert.equal(new Set(ips).size, uids.length);
        for (const ip of ips) assert.match(ip, /^127\.(?!0\.0\.)\d+\.\d+\.\d+$/);
        for (const [i, u] of uids.entries()) assert.equal(ipam.allocate(u), ips[i]);
      }),
    );
  });

  it('applies probe thresholds', () => {
    const s = new ProbeState({ failureThreshold: 2, successThreshold: 1 }, true);
    assert.equal(s.record(false), false);
    assert.equal(s.record(false), true);
    assert.equal(s.result, false);
    assert.equal(s.record(true), true);
  });

  it('provisions only pending claims addressed to kruntimes.io/local-dir', () => {
    const claim = {
      metadata: {
        name: 'd',
        namespace: 'ns',
        uid: 'u',
        annotations: { 'volume.kubernetes.io/storage-provisioner': PROVISIONER },
      },
      spec: { resources: { requests: { storage: '2Gi' } } },
    };
    assert.ok(wantsVolume(claim));
    assert.ok(!wantsVolume({ ...claim, spec: { volumeName: 'bound' } }));
    assert.ok(!wantsVolume({ ...claim, metadata: { ...claim.metadata, annotations: {} } }));
    const pv = volumeFor(claim, '/root/v');
    assert.equal(pv.metadata.name, 'pvc-u');
    assert.equal(pv.spec.hostPath?.path, '/root/v/pvc-u');
    assert.deepEqual((pv.spec as { capacity: unknown }).capacity, { storage: '2Gi' });
  });
});
