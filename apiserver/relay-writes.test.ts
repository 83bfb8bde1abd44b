import assert from 'node:assert/strict';
import type { Clock } from '../lib/fn/queue.ts';
import { HOLD_MS, SEE_WRITES_MS, TOMBSTONES, WriteFences } from './relay-writes.ts';
import { rvAtLeast } from './relay-cache.ts';

/** A clock whose timers fire only when time is advanced. */
class ManualClock implements Clock {
  private t = 0;
  private readonly timers = new Map<object, { at: number; fn: () => void }>();
  now(): number {
    return this.t;
  }
  setTimeout(fn: () => void, ms: number): unknown {
    const id = {};
    this.timers.set(id, { at: this.t + ms, fn });
    return id;
  }
  clearTimeout(id: unknown): void {
    this.timers.delete(id as object);
  }
  advance(ms: number): void {
    this.t += ms;
    for (const [id, tm] of [...this.timers]) {
      if (tm.at > this.t) continue;
      this.timers.delete(id);
      tm.fn();
    }
  }
}

/** A cache that shows a write once told to, counting how often it was looked at. */
function cache(): { seen: () => boolean; arrive: () => void; looks: () => number } {
  let there = false;
  let looks = 0;
  return {
    seen: () => (looks++, there),
    arrive: () => void (there = true),
    looks: () => looks,
  };
}

describe('relay read-your-writes fences', () => {
  it('a wait ends when a cache change shows the writes, and looks only then (no spinning)', async () => {
    const clock = new ManualClock();
    const f = new WriteFences(clock);
    const c = cache();
    const done = f.wait(c.seen);
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    assert.equal(c.looks(), 1, 'checked once at the start, not again until the cache changes');
    f.changed();
    assert.equal(c.looks(), 2);
    c.arrive();
    f.changed();
    assert.equal(await done, true);
    assert.deepEqual(f.size, { waiting: 0, held: 0 });
  });

  it('a wait gives up at its deadline, and the key is then held until the cache shows the writes', async () => {
    const clock = new ManualClock();
    const f = new WriteFences(clock);
    const c = cache();
    const done = f.wait(c.seen);
    clock.advance(SEE_WRITES_MS);
    assert.equal(await done, false);
    f.hold('fn ns/a', c.seen);
    assert.deepEqual(f.holding('fn ns/a'), { wait: true });
    clock.advance(HOLD_MS - 1);
    assert.deepEqual(f.holding('fn ns/a'), { wait: true }, 'not invoked on the stale cache');
    c.arrive();
    assert.deepEqual(f.holding('fn ns/a'), { wait: false });
    assert.deepEqual(f.size, { waiting: 0, held: 0 }, 'the hold is dropped once the writes are seen');
  });

  it('a hold expires: the key is invoked on the cache as it is, and told so', () => {
    const clock = new ManualClock();
    const f = new WriteFences(clock);
    f.hold('fn ns/a', () => false);
    clock.advance(HOLD_MS);
    assert.deepEqual(f.holding('fn ns/a'), { wait: false, expired: true });
    assert.deepEqual(f.holding('fn ns/a'), { wait: false });
  });

  it('a released hold (the object was deleted) no longer holds the key', () => {
    const f = new WriteFences(new ManualClock());
    f.hold('fn ns/a', () => false);
    f.release('fn ns/a');
    assert.deepEqual(f.holding('fn ns/a'), { wait: false });
  });

  it('a write whose object was deleted since (a finalizer removed) is seen, so its key is not held for a minute', () => {
    const f = new WriteFences(new ManualClock());
    const id = '/api/v1/pods ns/p';
    // What the relay checks for a write at resourceVersion 10 of an object no informer holds now.
    const seen = (): boolean => rvAtLeast(f.deletedAt(id), '10');
    f.hold('fn ns/a', seen);
    assert.deepEqual(f.holding('fn ns/a'), { wait: true });
    f.deleted(id, '12');
    assert.deepEqual(f.holding('fn ns/a'), { wait: false });
  });

  it('remembers a bounded number of deletions, the oldest forgotten first', () => {
    const f = new WriteFences(new ManualClock());
    for (let i = 0; i <= TOMBSTONES; i++) f.deleted(`c ns/o-${i}`, String(i + 1));
    assert.equal(f.deletedAt('c ns/o-0'), undefined);
    assert.equal(f.deletedAt(`c ns/o-${TOMBSTONES}`), String(TOMBSTONES + 1));
  });
});
