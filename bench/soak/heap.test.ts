import assert from 'node:assert/strict';
import { goHeapOf } from './heap.ts';
import { growth, groups, stringsContaining, type Snapshot } from './heap-summary.ts';

const MB = 1024 * 1024;

describe('soak heap readings', () => {
  it("reads the Go runtime's heap gauges from a /metrics text", () => {
    const text = [
      '# TYPE go_memstats_heap_inuse_bytes gauge',
      `go_memstats_heap_inuse_bytes ${200 * MB}`,
      `go_memstats_heap_idle_bytes ${300 * MB}`,
      `go_memstats_heap_released_bytes 1.048576e+08`,
      `process_resident_memory_bytes ${450 * MB}`,
      'go_memstats_heap_inuse_bytes_total 1',
    ].join('\n');
    assert.deepEqual(goHeapOf(text), { rssMb: 450, heapInuseMb: 200, heapIdleMb: 300, heapReleasedMb: 100 });
    assert.equal(goHeapOf('process_resident_memory_bytes 1\n'), undefined, 'not a Go process');
  });

  it('groups a heap snapshot by constructor and diffs two of them', () => {
    const snap = (runs: number): Snapshot => ({
      snapshot: { meta: { node_fields: ['type', 'name', 'self_size'], node_types: [['object', 'string']] } },
      // type, name (index into strings), self size
      nodes: [...Array.from({ length: runs }, () => [0, 0, 100]).flat(), 1, 1, 40],
      strings: ['Run', 'soak-1/run-a'],
    });
    const g = growth(groups(snap(1)), groups(snap(3)));
    assert.deepEqual(g[0], { key: 'object:Run', count: 2, bytes: 200 });
    assert.equal(stringsContaining(snap(1), 'soak-1/'), 1);
    assert.equal(stringsContaining(snap(1), 'soak-2/'), 0);
  });
});
