import assert from 'node:assert/strict';
import { usedByAssignedRuns } from './workspaces.ts';

type RunLike = Parameters<typeof usedByAssignedRuns>[2][number];
const run = (workspace: string | undefined, phase?: string, assignedPodUID?: string): RunLike => ({
  spec: workspace ? { workspace: { name: workspace } } : {},
  status: { ...(phase ? { phase } : {}), ...(assignedPodUID ? { assignedPodUID } : {}) },
});

describe('runtimed workspace cleanup: still in use (from Run status)', () => {
  it('is in use while a non-terminal Run assigned to this Pod references the workspace', () => {
    for (const phase of ['Scheduled', 'Running', 'Ready', undefined])
      assert.equal(usedByAssignedRuns('w', 'me', [run('w', phase, 'me')]), true, String(phase));
    assert.equal(usedByAssignedRuns('w', 'me', [run('w', 'Scheduled')]), true, 'no UID recorded yet');
  });

  it('is not in use for terminal Runs, other workspaces, Runs without one, or another Pod incarnation', () => {
    const runs = [
      ...['Succeeded', 'Failed', 'Timeout', 'Cancelled'].map((p) => run('w', p, 'me')),
      run('other', 'Running', 'me'),
      run(undefined, 'Running', 'me'),
      run('w', 'Running', 'previous-pod-uid'),
    ];
    assert.equal(usedByAssignedRuns('w', 'me', runs), false);
    assert.equal(usedByAssignedRuns('w', 'me', []), false);
  });
});
