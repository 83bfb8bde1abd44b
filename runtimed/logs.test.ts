import assert from 'node:assert/strict';
import { BATCH_BYTES, batchedWriter } from './logs.ts';

/** A writer whose deferred flushes run when the test says. */
function harness(): { writes: string[]; w: ReturnType<typeof batchedWriter>; turn: () => void } {
  const writes: string[] = [];
  const queued: (() => void)[] = [];
  const w = batchedWriter(
    (s) => writes.push(s),
    (fn) => queued.push(fn),
  );
  return { writes, w, turn: () => queued.splice(0).forEach((fn) => fn()) };
}

describe('runtimed log records: one write per turn of the event loop', () => {
  it('writes the records of one turn together, in order, once the turn ends', () => {
    const { writes, w, turn } = harness();
    w.write('a\n');
    w.write('b\n');
    w.write('c\n');
    assert.deepEqual(writes, [], 'nothing before the turn ends');
    turn();
    assert.deepEqual(writes, ['a\nb\nc\n']);
    w.write('d\n');
    turn();
    assert.deepEqual(writes, ['a\nb\nc\n', 'd\n']);
    turn();
    assert.equal(writes.length, 2, 'an empty turn writes nothing');
  });

  it('writes at once past BATCH_BYTES, and whatever is pending on flush', () => {
    const { writes, w, turn } = harness();
    const big = 'x'.repeat(BATCH_BYTES);
    w.write('a\n');
    w.write(big);
    assert.deepEqual(writes, [`a\n${big}`]);
    w.write('b\n');
    w.flush();
    assert.deepEqual(writes, [`a\n${big}`, 'b\n']);
    turn();
    assert.equal(writes.length, 2);
  });

  it('writes through setImmediate by default', async () => {
    const writes: string[] = [];
    const w = batchedWriter((s) => writes.push(s));
    w.write('a\n');
    w.write('b\n');
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(writes, ['a\nb\n']);
  });
});
