import assert from 'node:assert/strict';
import fc from 'fast-check';
import { WorkQueue, type Clock } from './queue.ts';

/** A manual clock: timers fire only when advanced; like Node, a delay over 2^31 - 1 ms fires after 1 ms. */
function fakeClock(): Clock & { advance(ms: number): void } {
  let now = 0;
  let timers: { at: number; fn: () => void; id: number }[] = [];
  let seq = 0;
  return {
    now: () => now,
    setTimeout: (fn, ms) => {
      const id = ++seq;
      timers.push({ at: now + (ms > 2 ** 31 - 1 ? 1 : ms), fn, id });
      return id;
    },
    clearTimeout: (id) => {
      timers = timers.filter((t) => t.id !== id);
    },
    advance(ms) {
      now += ms;
      const due = timers.filter((t) => t.at <= now).sort((a, b) => a.at - b.at);
      timers = timers.filter((t) => t.at > now);
      for (const t of due) t.fn();
    },
  };
}

describe('lib/fn WorkQueue', () => {
  it('holds a delayed add longer than a Node timer until it is due (a Run TTL of 30 days)', () => {
    const clock = fakeClock();
    const q = new WorkQueue(clock);
    const days30 = 30 * 24 * 3600 * 1000;
    q.addAfter('ttl', days30);
    clock.advance(1000);
    assert.equal(q.length, 0);
    clock.advance(days30 - 2000);
    assert.equal(q.length, 0);
    clock.advance(1000);
    assert.equal(q.length, 1);
  });

  it('de-duplicates queued keys and never hands out a key that is being processed', async () => {
    const q = new WorkQueue(fakeClock());
    q.add('a');
    q.add('a');
    q.add('b');
    assert.equal(q.length, 2);
    const k = await q.get();
    assert.equal(k, 'a');
    q.add('a');
    assert.equal(await q.get(), 'b');
    assert.equal(q.length, 0, 'a is dirty but held back while processing');
    q.done('a');
    assert.equal(await q.get(), 'a');
  });

  it('processes every added key at least once after its last add, for any interleaving', async () => {
    const ops = fc.array(
      fc.oneof(
        fc.record({ t: fc.constant('add' as const), k: fc.constantFrom('a', 'b', 'c') }),
        fc.record({ t: fc.constant('work' as const) }),
      ),
      { maxLength: 60 },
    );
    await fc.assert(
      fc.asyncProperty(ops, async (seq) => {
        const q = new WorkQueue(fakeClock());
        const pendingSince = new Map<string, number>();
        const inFlight: string[] = [];
        let step = 0;
        for (const op of seq) {
          step++;
          if (op.t === 'add') {
            q.add(op.k);
            pendingSince.set(op.k, step);
            continue;
          }
          const done = inFlight.shift();
          if (done) q.done(done);
          if (q.length) {
            const k = (await q.get())!;
            assert.ok(!inFlight.includes(k), 'same key twice in flight');
            inFlight.push(k);
            pendingSince.delete(k);
          }
        }
        for (const k of inFlight) q.done(k);
        const seen = new Set<string>();
        while (q.length) {
          const k = (await q.get())!;
          seen.add(k);
          q.done(k);
        }
        for (const k of pendingSince.keys()) assert.ok(seen.has(k) || inFlight.includes(k), `${k} lost`);
      }),
    );
  });

  it('backs off failures exponentially with jitter and forgets on success', async () => {
    const clock = fakeClock();
    const q = new WorkQueue(clock, 100, 10_000, () => 1);
    assert.equal(q.addRateLimited('k'), 100);
    assert.equal(q.addRateLimited('k'), 200);
    assert.equal(q.addRateLimited('k'), 400);
    q.forget('k');
    assert.equal(q.addRateLimited('k'), 100);
    assert.equal(q.length, 0);
    clock.advance(100);
    assert.equal(await q.get(), 'k');
  });

  it('drops a gone key: its delayed add never fires and its backoff starts over', () => {
    const clock = fakeClock();
    const q = new WorkQueue(clock, 100, 10_000, () => 1);
    q.addAfter('ttl', 30 * 24 * 3600 * 1000);
    q.addRateLimited('k');
    q.addRateLimited('k');
    assert.equal(q.delayedCount, 2);
    q.drop('ttl');
    q.drop('k');
    assert.equal(q.delayedCount, 0);
    clock.advance(31 * 24 * 3600 * 1000);
    assert.equal(q.length, 0);
    assert.equal(q.addRateLimited('k'), 100);
  });

  it('keeps the earliest delayed add and releases waiters on shutdown', async () => {
    const clock = fakeClock();
    const q = new WorkQueue(clock);
    q.addAfter('x', 1000);
    q.addAfter('x', 50);
    clock.advance(60);
    assert.equal(q.length, 1);
    const w = q.get();
    assert.equal(await w, 'x');
    const waiting = q.get();
    q.shutDown();
    assert.equal(await waiting, undefined);
  });
});
