import assert from 'node:assert/strict';
import { functionReady } from '../../lib/run/phases.ts';
import { ended, reset } from './index.ts';

const ready = {
  metadata: { name: 'f', namespace: 'n' },
  spec: { runtime: 'r' },
  status: {
    ...functionReady({ assignedPod: 'p', assignedPodUID: 'u', attempt: 1 }, 't0', {
      protocol: 'HTTPS' as const,
      url: 'https://p/invoke',
    }),
  },
};

describe('run-reaper on a Ready function Run whose Pod is lost (issue 15)', () => {
  it('retry: back to Pending without the endpoint, Ready=False, next attempt', () => {
    const s = reset(ready, 'PodGone', 'assigned pod is gone', 't1');
    assert.equal(s.phase, 'Pending');
    assert.equal(s.endpoint, undefined);
    assert.equal(s.assignedPod, undefined);
    assert.equal(s.attempt, 2);
    assert.equal(s.conditions?.find((c) => c.type === 'Ready')?.status, 'False');
  });

  it('no retry: Failed without the endpoint, Ready=False', () => {
    const s = ended(ready, 'PodGone', 'assigned pod is gone', 't1');
    assert.equal(s.phase, 'Failed');
    assert.equal('endpoint' in s, false);
    assert.equal(s.conditions?.find((c) => c.type === 'Ready')?.reason, 'PodGone');
  });
});
