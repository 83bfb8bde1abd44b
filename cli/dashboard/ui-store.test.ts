/** The page's live collection (ui/store.ts): deltas coalesced into one render per flush, none lost. */
import assert from 'node:assert/strict';
import { LiveStore } from '../../ui/store.ts';

type O = { metadata: { name: string; namespace?: string }; v: number };
const o = (name: string, v = 0): O => ({ metadata: { name, namespace: 'a' }, v });

describe('dashboard page: live collection', () => {
  it('renders a burst of 1,000 deltas once, with every object at its last version', () => {
    const renders: O[][] = [];
    const queue: (() => void)[] = [];
    const store = new LiveStore<O>(
      (items) => renders.push(items),
      (f) => queue.push(f),
    );
    store.snapshot([o('x')]);
    for (let i = 0; i < 1000; i++) store.delta('added', o(`r${i % 500}`, i));
    assert.equal(queue.length, 1, 'one flush scheduled for the whole burst');
    queue.shift()?.();
    assert.equal(renders.length, 1);
    assert.equal(renders[0]?.length, 501);
    assert.equal(renders[0]?.find((x) => x.metadata.name === 'r7')?.v, 507);
  });

  it('schedules again after a flush; deletions and a new snapshot replace what was there', () => {
    const renders: O[][] = [];
    const queue: (() => void)[] = [];
    const store = new LiveStore<O>(
      (items) => renders.push(items),
      (f) => queue.push(f),
    );
    store.snapshot([o('a'), o('b')]);
    queue.shift()?.();
    store.delta('deleted', o('a'));
    store.delta('modified', o('b', 2));
    assert.equal(queue.length, 1);
    queue.shift()?.();
    assert.deepEqual(renders.at(-1), [o('b', 2)]);
    store.snapshot([o('c')]);
    queue.shift()?.();
    assert.deepEqual(renders.at(-1), [o('c')]);
    assert.equal(store.size, 1);
  });
});
