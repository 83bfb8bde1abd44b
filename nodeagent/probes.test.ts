import assert from 'node:assert/strict';
import type { Probe } from './pod-types.ts';
import { nextProbeInMs, ProbeLoop, ProbeState } from './probes.ts';

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

describe('node agent probe loop (issue 17)', () => {
  /** A loop on a fake clock: probes answer when the test resolves them. */
  interface Harness {
    loop: ProbeLoop;
    timers: { f: () => void; ms: number }[];
    pending: ((ok: boolean) => void)[];
    flips: boolean[];
    settle: () => Promise<void>;
    advance: (ms: number) => void;
  }
  function harness(probe: Probe = { httpGet: { path: '/readyz', port: 1 }, periodSeconds: 1 }): Harness {
    let now = 0;
    const timers: { f: () => void; ms: number }[] = [];
    const pending: ((ok: boolean) => void)[] = [];
    const flips: boolean[] = [];
    const loop = new ProbeLoop({
      probe,
      run: () => new Promise<boolean>((r) => pending.push(r)),
      onFlip: (ok) => flips.push(ok),
      initial: false,
      active: () => true,
      schedule: (f, ms) => void timers.push({ f, ms }),
      now: () => now,
    });
    const settle = (): Promise<void> => new Promise((r) => setImmediate(r));
    return { loop, timers, pending, flips, settle, advance: (ms: number) => void (now += ms) };
  }

  it('probes at once when triggered while not ready, once at a time, and no more once ready', async () => {
    const h = harness();
    h.loop.start();
    h.timers.shift()!.f(); // the first tick: refused (nothing listens yet)
    h.pending.shift()!(false);
    await h.settle();
    assert.equal(h.timers.at(-1)?.ms, 1000);
    h.advance(300);
    h.loop.trigger(); // a Pod update while the container is not ready: probe now, not at the next period
    h.loop.trigger(); // one at a time
    assert.equal(h.pending.length, 1);
    h.pending.shift()!(true);
    await h.settle();
    assert.deepEqual(h.flips, [true]);
    h.loop.trigger(); // ready: nothing to do until the next tick
    assert.equal(h.pending.length, 0);
  });

  it('is not triggered before initialDelaySeconds', () => {
    const h = harness({ tcpSocket: { port: 1 }, periodSeconds: 1, initialDelaySeconds: 5 });
    h.loop.start();
    assert.equal(h.timers[0]?.ms, 5000);
    h.advance(4000);
    h.loop.trigger();
    assert.equal(h.pending.length, 0);
    h.advance(1000);
    h.loop.trigger();
    assert.equal(h.pending.length, 1);
  });
});
