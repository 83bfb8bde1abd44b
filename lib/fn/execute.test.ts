import assert from 'node:assert/strict';
import { writeBatches } from './execute.ts';
import { R } from './resources.ts';
import type { Operation } from './types.ts';

const status = (name: string): Operation => ({
  op: 'status',
  resource: R.runs,
  object: { metadata: { name, namespace: 'ns' }, status: {} },
});
const event = (name: string): Operation => ({
  op: 'create',
  resource: R.events,
  object: { metadata: { name, namespace: 'ns' } },
});
const names = (batches: Operation[][]): string[][] =>
  batches.map((b) => b.map((o) => ('object' in o ? (o.object.metadata.name ?? '') : o.op)));

describe('fn executeOperations: write batches', () => {
  it("sends a waiting Run's status and its Event together with the other Runs' (the scheduler's backlog)", () => {
    const ops: Operation[] = [];
    for (let i = 0; i < 20; i++) ops.push(status(`r${i}`), event(`e${i}`));
    const batches = writeBatches(ops);
    assert.deepEqual(
      batches.map((b) => b.length),
      [16, 16, 8],
      'interleaved status writes and Events go out 16 at a time, not one by one',
    );
  });

  it('keeps every other operation alone and in order, and leaves requeue out', () => {
    const job: Operation = { op: 'create', resource: R.pods, object: { metadata: { name: 'job', namespace: 'ns' } } };
    const del: Operation = { op: 'delete', resource: R.runs, namespace: 'ns', name: 'gone' };
    const ops: Operation[] = [
      status('a'),
      job,
      status('b'),
      event('e'),
      { op: 'requeue', afterMs: 5 },
      del,
      status('c'),
    ];
    assert.deepEqual(names(writeBatches(ops)), [['a'], ['job'], ['b', 'e'], ['delete'], ['c']]);
  });

  it('a requeue between two status writes is a barrier: the second goes out only after the first (devws commit point)', () => {
    const ops: Operation[] = [status('ws'), { op: 'requeue', afterMs: 1000 }, status('op'), event('e')];
    assert.deepEqual(names(writeBatches(ops)), [['ws'], ['op', 'e']]);
  });
});
