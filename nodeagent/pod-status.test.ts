import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  buildPodStatus,
  podPhase,
  restartBackoff,
  shouldRestart,
  BACKOFF_INITIAL_MS,
  BACKOFF_MAX_MS,
  type Backoff,
  type ContainerView,
  type PodView,
} from './pod-status.ts';

const view = (state: ContainerView['state'], extra: Partial<ContainerView> = {}): ContainerView => ({
  spec: { name: 'c', image: 'bash' },
  state,
  restartCount: 0,
  ready: false,
  started: 'running' in state || 'terminated' in state,
  willRestart: false,
  ...extra,
});
const pod = (containers: ContainerView[], extra: Partial<PodView> = {}): PodView => ({
  podIP: '127.1.1.1',
  hostIP: '127.0.0.1',
  startTime: 't',
  initialized: true,
  initContainers: [],
  containers,
  sandboxReady: true,
  ...extra,
});
const term = (exitCode: number): ContainerView['state'] => ({
  terminated: { exitCode, reason: exitCode ? 'Error' : 'Completed', finishedAt: 'f' },
});

describe('node agent pod status', () => {
  it('derives the phase from container states', () => {
    assert.equal(podPhase(pod([view({ waiting: { reason: 'ContainerCreating' } })])), 'Pending');
    assert.equal(podPhase(pod([view({ running: { startedAt: 's' } })])), 'Running');
    assert.equal(podPhase(pod([view(term(0)), view(term(0))])), 'Succeeded');
    assert.equal(podPhase(pod([view(term(0)), view(term(1))])), 'Failed');
    assert.equal(podPhase(pod([view(term(1), { willRestart: true })])), 'Running');
    assert.equal(
      podPhase(pod([view({ running: { startedAt: 's' } })], { failed: { reason: 'DeadlineExceeded', message: 'm' } })),
      'Failed',
    );
    assert.equal(podPhase(pod([view({ waiting: { reason: 'PodInitializing' } })], { initialized: false })), 'Pending');
  });

  it('is terminal exactly when every container terminated without a pending restart', () => {
    const st = fc.oneof(fc.constant('running'), fc.constant('ok'), fc.constant('fail'), fc.constant('restart'));
    fc.assert(
      fc.property(fc.array(st, { minLength: 1, maxLength: 5 }), (kinds) => {
        const cs = kinds.map((k) =>
          k === 'running'
            ? view({ running: { startedAt: 's' } })
            : view(term(k === 'ok' ? 0 : 1), { willRestart: k === 'restart' }),
        );
        const phase = podPhase(pod(cs));
        const terminal = kinds.every((k) => k === 'ok' || k === 'fail');
        assert.equal(phase === 'Succeeded' || phase === 'Failed', terminal);
        if (terminal) assert.equal(phase, kinds.includes('fail') ? 'Failed' : 'Succeeded');
      }),
    );
  });

  it('keeps lastTransitionTime for unchanged conditions and sets Ready from containers', () => {
    const running = pod([view({ running: { startedAt: 's' } }, { ready: true })]);
    const first = buildPodStatus(running, 'T1');
    const second = buildPodStatus(running, 'T2', first.conditions);
    assert.equal(second.conditions?.find((c) => c.type === 'Ready')?.status, 'True');
    assert.equal(second.conditions?.find((c) => c.type === 'Ready')?.lastTransitionTime, 'T1');
    const done = buildPodStatus(pod([view(term(0))]), 'T3', second.conditions);
    const ready = done.conditions?.find((c) => c.type === 'Ready');
    assert.equal(ready?.status, 'False');
    assert.equal(ready?.reason, 'PodCompleted');
    assert.equal(ready?.lastTransitionTime, 'T3');
  });

  it('applies restart policies and a bounded backoff', () => {
    assert.equal(shouldRestart('Never', 1), false);
    assert.equal(shouldRestart('OnFailure', 0), false);
    assert.equal(shouldRestart('OnFailure', 2), true);
    assert.equal(shouldRestart('Always', 0), true);
    fc.assert(
      fc.property(fc.array(fc.nat(300_000), { maxLength: 50 }), (gaps) => {
        let b: Backoff | undefined;
        let t = 0;
        for (const g of gaps) {
          b = restartBackoff(b, (t += g));
          if (b.delayMs > BACKOFF_MAX_MS || b.delayMs < BACKOFF_INITIAL_MS) return false;
        }
        return true;
      }),
    );
  });

  it('doubles the backoff per quick restart, and starts over after a long run (soak: 60 s from the 7th kill on)', () => {
    let b: Backoff | undefined;
    const delays: number[] = [];
    for (let i = 0; i < 9; i++) delays.push((b = restartBackoff(b, i * 1000)).delayMs);
    assert.deepEqual(delays, [500, 1000, 2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000]);
    // The seventh kill of a server that ran 2.5 minutes since its last restart waits as the first.
    assert.equal(restartBackoff(b, 8000 + 150_000).delayMs, BACKOFF_INITIAL_MS);
    assert.equal(restartBackoff(b, 8000 + 2 * BACKOFF_MAX_MS).delayMs, BACKOFF_MAX_MS, 'the cap holds until then');
  });
});
