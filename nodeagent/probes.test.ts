import assert from 'node:assert/strict';
import { nextProbeInMs, ProbeState } from './probes.ts';

describe('node agent probes', () => {
  it('starts probes every period measured start to start, as the kubelet ticker does (issue 17)', () => {
    const probe = { httpGet: { path: '/readyz', port: 1 }, periodSeconds: 1 };
    // A probe answered after 800 ms (a readiness check held while runtimed starts): the next one
    // starts 200 ms later, 1 s after the previous one started, not 1 s after it ended.
    assert.equal(nextProbeInMs(probe, 5000, 5800), 200);
    assert.equal(nextProbeInMs(probe, 5000, 5000), 1000);
    // Longer than the period (up to the timeout): the next one starts at once.
    assert.equal(nextProbeInMs(probe, 5000, 6300), 0);
    // The kubelet's default period is 10 s.
    assert.equal(nextProbeInMs({ tcpSocket: { port: 1 } }, 0, 100), 9900);
  });

  it('flips a readiness result after successThreshold successes and failureThreshold failures', () => {
    const st = new ProbeState({ successThreshold: 1, failureThreshold: 2 }, false);
    assert.equal(st.record(true), true);
    assert.equal(st.record(false), false);
    assert.equal(st.record(false), true);
    assert.equal(st.result, false);
  });
});
