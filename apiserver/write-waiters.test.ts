import assert from 'node:assert/strict';
import { WriteWaiters, type WaitClock } from './write-waiters.ts';

/** Timers fired by hand. */
function fakeClock(): WaitClock & { fire(): void; pending: number } {
  const timers = new Set<{ fn: () => void }>();
  return {
    setTimeout: (fn) => {
      const t = { fn };
      timers.add(t);
      return t;
    },
    clearTimeout: (t) => timers.delete(t as { fn: () => void }),
    fire: () => {
      for (const t of [...timers]) {
        timers.delete(t);
        t.fn();
      }
    },
    get pending() {
      return timers.size;
    },
  };
}
const settled = async (p: Promise<void>): Promise<boolean> => {
  let done = false;
  void p.then(() => (done = true));
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  return done;
};

describe('relay read-your-writes waits (WriteWaiters)', () => {
  it('resolves at once when the store already holds the write', async () => {
    const w = new WriteWaiters(fakeClock());
    assert.equal(await settled(w.wait('runs|ns/a', () => true, 2000)), true);
    assert.equal(w.size, 0);
  });

  it('is woken by the delta that brings the write, not by polling the stores', async () => {
    const clock = fakeClock();
    const w = new WriteWaiters(clock);
    let rv = 1;
    let checks = 0;
    const held = (): boolean => {
      checks++;
      return rv >= 2;
    };
    const p = w.wait('runs|ns/a', held, 2000);
    assert.equal(await settled(p), false);
    assert.equal(checks, 1, 'checked once while nothing changed');
    w.changed('runs|ns/b');
    w.changed('runs|ns/a');
    assert.equal(await settled(p), false, 'a delta of an older version does not end the wait');
    rv = 2;
    w.changed('runs|ns/a');
    assert.equal(await settled(p), true);
    assert.equal(checks, 3);
    assert.equal(clock.pending, 0, 'its deadline timer is cleared');
    assert.equal(w.size, 0);
  });

  it('gives up at the deadline', async () => {
    const clock = fakeClock();
    const w = new WriteWaiters(clock);
    const p = w.wait('runs|ns/a', () => false, 2000);
    assert.equal(await settled(p), false);
    clock.fire();
    assert.equal(await settled(p), true);
    assert.equal(w.size, 0);
  });

  it('wakes every wait of the object that the delta satisfies', async () => {
    const w = new WriteWaiters(fakeClock());
    let rv = 1;
    const a = w.wait('runs|ns/a', () => rv >= 2, 2000);
    const b = w.wait('runs|ns/a', () => rv >= 3, 2000);
    rv = 2;
    w.changed('runs|ns/a');
    assert.deepEqual([await settled(a), await settled(b)], [true, false]);
    rv = 3;
    w.changed('runs|ns/a');
    assert.equal(await settled(b), true);
  });
});
