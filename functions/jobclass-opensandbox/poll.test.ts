import assert from 'node:assert/strict';
import fc from 'fast-check';
import { POLL_MAX_MS, POLL_MIN_MS, executionAgeMs, pollDelayMs } from './poll.ts';

/** Poll instants of a sandbox observed from creation until `lifeMs` (as the adapter requeues). */
function schedule(lifeMs: number): number[] {
  const at: number[] = [];
  for (let t = pollDelayMs(0); t <= lifeMs; t += pollDelayMs(t)) at.push(t);
  return at;
}

describe('jobclass-opensandbox adaptive poll', () => {
  it('polls fast while young and backs off to the cap', () => {
    assert.equal(pollDelayMs(0), POLL_MIN_MS);
    assert.equal(pollDelayMs(-5), POLL_MIN_MS, 'clock skew: a start in the future is new');
    assert.equal(pollDelayMs(Number.NaN), POLL_MIN_MS);
    assert.equal(pollDelayMs(4000), 1000);
    assert.equal(pollDelayMs(3_600_000), POLL_MAX_MS);
    assert.deepEqual(schedule(1000), [250, 500, 750, 1000], 'a sandbox that ends within 1 s is seen within 250 ms');
  });

  it('is bounded, monotonic in the age, and grows at most geometrically', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10 ** 9 }), fc.integer({ min: 0, max: 10 ** 9 }), (a, b) => {
        const [x, y] = [pollDelayMs(Math.min(a, b)), pollDelayMs(Math.max(a, b))];
        assert.ok(POLL_MIN_MS <= x && x <= y && y <= POLL_MAX_MS);
        assert.ok(pollDelayMs(a) <= Math.max(POLL_MIN_MS, a * 0.25 + 1));
      }),
    );
  });

  it('costs few lists: far fewer than a fixed fast poll, close to the cap for long sandboxes', () => {
    const tenMinutes = schedule(600_000).length;
    assert.ok(tenMinutes <= 600_000 / POLL_MAX_MS + 25, `${tenMinutes} lists in 10 min`);
    assert.ok(schedule(60_000).length <= 30, `${schedule(60_000).length} lists in the first minute`);
  });

  it('measures the age from status.startTime', () => {
    const now = new Date('2026-09-17T10:00:10Z');
    assert.equal(executionAgeMs('2026-09-17T10:00:00Z', now), 10_000);
    assert.equal(executionAgeMs(undefined, now), 0);
    assert.equal(executionAgeMs('garbage', now), 0);
  });
});
