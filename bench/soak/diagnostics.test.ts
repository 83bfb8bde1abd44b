import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Outcome } from './accounting.ts';
import { diagnose, eventsByObject, keepLogs, markerLines } from './diagnostics.ts';

const outcome = (name: string, extra: Partial<Outcome>): Outcome => ({
  name,
  kind: 'task-short',
  phases: ['Pending', 'Scheduled', 'Running', 'Succeeded'],
  createdAt: 1,
  phase: 'Succeeded',
  executions: 1,
  ...extra,
});

describe('soak diagnostics (issue 18)', () => {
  const markers = [
    'task-short-1 111-5 1764640000.000001 soak-a /workspace/.kruntimes/runs/u1',
    'task-short-10 112-6 1764640000.100000 soak-a /workspace/.kruntimes/runs/u10',
    'task-short-1 113-7 1764640009.000002 soak-b /workspace/.kruntimes/runs/u1',
    'workflow-2/write 114-8 1764640001.0 soak-a /x',
    'workflow-2/read 115-9 1764640002.0 soak-a /x',
    '',
  ].join('\n');

  it("keeps an item's own marker lines and a workflow's step lines, not another item's with the same prefix", () => {
    assert.deepEqual(
      markerLines(markers, 'task-short-1').map((l) => l.split(' ')[1]),
      ['111-5', '113-7'],
    );
    assert.equal(markerLines(markers, 'workflow-2').length, 2);
    assert.deepEqual(markerLines(markers, 'task-short-2'), []);
  });

  it('diagnoses only the items that went wrong, with their status, events in time order and markers', () => {
    const events = eventsByObject([
      { involvedObject: { name: 'task-short-1' }, reason: 'B', eventTime: '2026-12-02T02:00:02Z' },
      { involvedObject: { name: 'task-short-1' }, reason: 'A', firstTimestamp: '2026-12-02T02:00:01Z' },
      { involvedObject: { name: 'task-short-10' }, reason: 'C', firstTimestamp: '2026-12-02T02:00:00Z' },
    ]);
    const objects = new Map([
      ['task-short-1', { metadata: { name: 'task-short-1', uid: 'u1' }, status: { phase: 'Succeeded', attempt: 1 } }],
    ]);
    const found = diagnose(
      [outcome('task-short-1', { executions: 2 }), outcome('task-short-10', {})],
      objects,
      markers,
      events,
    );
    assert.equal(found.length, 1);
    assert.equal(found[0]!.verdict, 'duplicated');
    assert.equal(found[0]!.markers.length, 2);
    assert.deepEqual(
      found[0]!.events.map((e) => e.reason),
      ['A', 'B'],
    );
    assert.deepEqual(found[0]!.object, { uid: 'u1', created: undefined, status: { phase: 'Succeeded', attempt: 1 } });
  });

  it('keeps every *.log file of the environment with its path, and nothing else', () => {
    const root = mkdtempSync(join(tmpdir(), 'krt-soak-diag-'));
    try {
      const env = join(root, 'env');
      mkdirSync(join(env, 'logs'), { recursive: true });
      mkdirSync(join(env, 'nodes', 'a', 'pods', 'p', 'logs', 'runtimed'), { recursive: true });
      writeFileSync(join(env, 'logs', 'kube-apiserver.log'), 'x');
      writeFileSync(join(env, 'nodes', 'a', 'pods', 'p', 'logs', 'runtimed', '0.log'), 'y');
      writeFileSync(join(env, 'nodes', 'a', 'state.json'), '{}');
      keepLogs(env, join(root, 'kept'));
      assert.ok(existsSync(join(root, 'kept', 'logs', 'kube-apiserver.log')));
      assert.ok(existsSync(join(root, 'kept', 'nodes', 'a', 'pods', 'p', 'logs', 'runtimed', '0.log')));
      assert.deepEqual(readdirSync(join(root, 'kept', 'nodes', 'a')), ['pods']);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
