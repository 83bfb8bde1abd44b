import assert from 'node:assert/strict';
import { STALE_MS } from '../lib/run/fencing.ts';
import { classifyFailure, isShutdownKill } from './finish.ts';
import {
  FENCE_MS,
  LAUNCH_MIN_LEASE_MS,
  RenewalOrder,
  SettledAttempts,
  leaseValidity,
  mayLaunch,
  resumeDecision,
  takenAway,
} from './fence.ts';
import {
  ExecutionLease,
  MAX_LEASE_MS,
  parseRenewal,
  renewalDeadline,
  type LeaseClock,
} from './runtime-server/lease.ts';
import type { Run } from './types.ts';

const run = (status: Run['status']): Run => ({ metadata: { name: 'r', uid: 'u' }, spec: { runtime: 'bash' }, status });

class FakeClock implements LeaseClock {
  t = 0;
  private timers: { at: number; fn: () => void; live: boolean }[] = [];
  now(): number {
    return this.t;
  }
  setTimer(fn: () => void, ms: number): { cancel(): void } {
    const timer = { at: this.t + ms, fn, live: true };
    this.timers.push(timer);
    return { cancel: () => (timer.live = false) };
  }
  advance(ms: number): void {
    this.t += ms;
    for (const x of this.timers.filter((y) => y.live && y.at <= this.t)) {
      x.live = false;
      x.fn();
    }
  }
}

describe('fencing: execution lease timing', () => {
  it('ends the lease before the reaper may reschedule, with room for clock skew and the kill', () => {
    assert.ok(FENCE_MS + 5_000 <= STALE_MS, `FENCE_MS ${FENCE_MS} must stay well below the reaper's ${STALE_MS}`);
  });

  it('counts the validity from the heartbeat stamp, not from when the write was accepted', () => {
    assert.equal(leaseValidity(1_000, 1_000), FENCE_MS);
    assert.equal(leaseValidity(1_000, 4_000), FENCE_MS - 3_000);
    assert.equal(leaseValidity(1_000, 1_000 + FENCE_MS + 1), 0, 'a write slower than the lease grants nothing');
    assert.equal(leaseValidity(5_000, 4_000), FENCE_MS, 'a clock going backwards grants no more than FENCE_MS');
  });

  it('is not armed until the first renewal, then fences exactly once it lapses', () => {
    const clock = new FakeClock();
    let fenced = 0;
    const lease = new ExecutionLease(() => fenced++, clock);
    clock.advance(100_000);
    assert.equal(lease.expired(), false);
    assert.equal(fenced, 0);
    lease.renew(20_000);
    clock.advance(15_000);
    lease.renew(20_000);
    clock.advance(19_999);
    assert.equal(fenced, 0, 'a renewal pushes the deadline');
    assert.equal(lease.expired(), false);
    clock.advance(1);
    assert.equal(fenced, 1);
    assert.equal(lease.expired(), true);
  });

  it('a renewal processed late holds the lease no longer than the deadline its sender computed', () => {
    const clock = new FakeClock();
    let fenced = 0;
    const lease = new ExecutionLease(() => fenced++, clock);
    // runtimed sent "20 s from 0"; the Runtime Server (stopped, starved) processes it at 15 s.
    clock.advance(15_000);
    lease.renew(20_000, 20_000);
    assert.equal(lease.remainingMs(), 5_000);
    clock.advance(4_999);
    assert.equal(fenced, 0);
    clock.advance(1);
    assert.equal(fenced, 1, 'fenced at the sent deadline, not 20 s after processing');
    assert.equal(lease.expired(), true);
  });

  it('a renewal processed after its deadline ends the lease at once, however long the last one had', () => {
    const clock = new FakeClock();
    let fenced = 0;
    const lease = new ExecutionLease(() => fenced++, clock);
    lease.renew(20_000, 20_000);
    clock.advance(12_000);
    lease.renew(20_000, 10_000);
    assert.equal(lease.expired(), true);
    clock.advance(0);
    assert.equal(fenced, 1);
  });

  it('without a deadline (an older runtimed) counts validForMs from now; a later deadline is capped to it', () => {
    assert.equal(renewalDeadline(1_000, 20_000), 21_000);
    assert.equal(renewalDeadline(1_000, 20_000, 900_000), 21_000, 'another clock cannot lengthen the lease');
    assert.equal(renewalDeadline(1_000, 20_000, 5_000), 5_000);
    assert.equal(renewalDeadline(1_000, -5, 5_000), 1_000);
  });

  it('parses a renewal: validForMs, and the deadline as CLOCK_MONOTONIC nanoseconds', () => {
    assert.deepEqual(parseRenewal({ validForMs: 20_000 }), { validForMs: 20_000 });
    assert.deepEqual(parseRenewal({ validForMs: 20_000, deadlineNs: '123456789000' }), {
      validForMs: 20_000,
      deadlineMs: 123_456.789,
    });
    assert.equal(typeof parseRenewal({}), 'string');
    for (const deadlineNs of [123, '-1', '1e9', '', 'x'.repeat(3)])
      assert.equal(typeof parseRenewal({ validForMs: 1, deadlineNs }), 'string', JSON.stringify(deadlineNs));
  });

  it('launches only on a lease with room left: never on one a renewal after a stall armed for moments', () => {
    assert.equal(mayLaunch(undefined, 1_000), true, 'before the first renewal nothing is fenced');
    assert.equal(mayLaunch(1_000 + FENCE_MS, 1_000), true, 'a fresh renewal');
    assert.equal(mayLaunch(1_000 + LAUNCH_MIN_LEASE_MS, 1_000), true);
    assert.equal(mayLaunch(1_000 + LAUNCH_MIN_LEASE_MS - 1, 1_000), false);
    // The e2e case: a heartbeat stamped before runtimed was stopped, accepted after it resumed.
    assert.equal(mayLaunch(1_000 + leaseValidity(0, FENCE_MS - 7), 1_000), false, '7 ms left');
    assert.equal(mayLaunch(500, 1_000), false, 'lapsed');
    assert.ok(LAUNCH_MIN_LEASE_MS < FENCE_MS - 5_000, 'a lease renewed every 5 s heartbeat stays launchable');
  });

  it('renews in heartbeat order: a heartbeat answered after a fresher one renewed does not cut the lease short', () => {
    const order = new RenewalOrder();
    assert.equal(order.admit(1_000), true);
    assert.equal(order.admit(6_000), true, 'the next heartbeat');
    assert.equal(order.admit(2_000), false, 'stamped before the stall, answered after the fresh one');
    assert.equal(order.admit(6_000), false, 'the same heartbeat twice');
    assert.equal(order.admit(11_000), true);
  });

  it('refuses a validity that would disable fencing', () => {
    const lease = new ExecutionLease(() => undefined, new FakeClock());
    assert.throws(() => lease.renew(MAX_LEASE_MS + 1), RangeError);
    assert.throws(() => lease.renew(Number.NaN), RangeError);
    assert.throws(() => lease.renew(1_000, Number.NaN), RangeError);
  });

  it('classifies a fenced execution with its own reason', () => {
    const f = classifyFailure({
      id: 'u',
      state: 'FAILED',
      exitCode: -1,
      errorMessage: 'fenced',
      startedAt: '',
      records: 0,
    });
    assert.equal(f.reason, 'Fenced');
  });

  it('tells an execution killed because its Runtime Server stopped from a fenced one', () => {
    const s = { id: 'u', state: 'FAILED' as const, exitCode: -1, errorMessage: 'shutdown', startedAt: '', records: 0 };
    assert.equal(isShutdownKill(s), true);
    assert.equal(isShutdownKill({ ...s, errorMessage: 'fenced' }), false);
    assert.equal(classifyFailure(s).reason, 'ExecutionLost');
  });
});

describe('fencing: attempt token (takenAway)', () => {
  const held = run({ phase: 'Running', assignedPod: 'p', assignedPodUID: 'pu', attempt: 1 });

  it('keeps runtimed own versions: claim and in-place retries on the same Pod', () => {
    assert.equal(takenAway(run({ phase: 'Scheduled', assignedPod: 'p' }), held), false);
    assert.equal(takenAway(held, run({ ...held.status, attempt: 2 })), false);
    assert.equal(takenAway(held, run({ ...held.status, phase: 'Succeeded' })), false);
  });

  it('sees a reschedule: back to Pending, to another Pod, or a later attempt Scheduled again on this Pod', () => {
    assert.equal(takenAway(held, run({ phase: 'Pending', attempt: 2 })), true);
    assert.equal(
      takenAway(held, run({ phase: 'Scheduled', assignedPod: 'q', assignedPodUID: 'qu', attempt: 2 })),
      true,
    );
    assert.equal(
      takenAway(held, run({ phase: 'Scheduled', assignedPod: 'p', assignedPodUID: 'pu', attempt: 2 })),
      true,
    );
    assert.equal(
      takenAway(
        run({ phase: 'Scheduled', assignedPod: 'p' }),
        run({ phase: 'Scheduled', assignedPod: 'p', attempt: 2 }),
      ),
      true,
    );
  });
});

describe('runtimed resumeDecision: a restarted runtimed never runs an attempt twice (issue 18 soak)', () => {
  const d = (createdBeforeStart: boolean, serverHasIt: boolean, launched: boolean): string =>
    resumeDecision({ createdBeforeStart, serverHasIt, launched });
  it('launches a Run created after runtimed started, whatever else is true', () => {
    assert.equal(d(false, false, false), 'launch');
    assert.equal(d(false, true, true), 'launch');
  });
  it('adopts the execution the Runtime Server still has', () => {
    assert.equal(d(true, true, true), 'adopt');
    assert.equal(d(true, true, false), 'adopt');
  });
  it('fails as lost an attempt that was launched (its record is in the Run directory) but the Runtime Server lost', () => {
    assert.equal(d(true, false, true), 'lost');
  });
  it('launches an older Run whose attempt never started (no launch record, e.g. a new attempt after the reaper)', () => {
    assert.equal(d(true, false, false), 'launch');
  });
});

describe('runtimed SettledAttempts: a late version of a released Run never starts the same attempt again (issue 18 soak)', () => {
  const withUid = (uid: string, status: Run['status']): Run => ({ ...run(status), metadata: { name: uid, uid } });

  it('skips a Scheduled version of an attempt already finished here, also an older attempt', () => {
    const s = new SettledAttempts();
    assert.equal(s.finished(run({ phase: 'Scheduled', attempt: 1 })), false, 'nothing finished yet');
    s.settle('u', 1);
    assert.equal(s.finished(run({ phase: 'Scheduled', attempt: 1 })), true, 'the lagging watch event of attempt 1');
    assert.equal(s.finished(run({ phase: 'Scheduled' })), true, 'no attempt yet counts as attempt 1');
    s.settle('u', 2);
    assert.equal(s.finished(run({ phase: 'Running', attempt: 1 })), true);
  });

  it('runs a new attempt (the reaper rescheduled it here) and other Runs', () => {
    const s = new SettledAttempts();
    s.settle('u', 1);
    assert.equal(s.finished(run({ phase: 'Scheduled', attempt: 2 })), false);
    assert.equal(s.finished(withUid('v', { phase: 'Scheduled', attempt: 1 })), false);
    s.forget('u');
    assert.equal(s.finished(run({ phase: 'Scheduled', attempt: 1 })), false);
  });

  it('is bounded: the oldest settled Run is forgotten first', () => {
    const s = new SettledAttempts(2);
    s.settle('a', 1);
    s.settle('b', 1);
    s.settle('a', 1); // refreshed: now the newest
    s.settle('c', 1);
    assert.equal(s.finished(withUid('b', { phase: 'Scheduled', attempt: 1 })), false, 'b was the oldest');
    assert.equal(s.finished(withUid('a', { phase: 'Scheduled', attempt: 1 })), true);
    assert.equal(s.finished(withUid('c', { phase: 'Scheduled', attempt: 1 })), true);
  });
});
