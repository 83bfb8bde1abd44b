import assert from 'node:assert/strict';
import { summaryLine } from './commands.ts';

describe('krt wf get: summary line', () => {
  it('shows what a WorkflowRun waits for while its job workspace is not available', () => {
    const condition = (status: 'True' | 'False', message: string): Record<string, string> => ({
      type: 'WaitingForWorkspace',
      status,
      reason: 'x',
      message,
      lastTransitionTime: '2026-12-01T00:00:00Z',
    });
    const waiting = {
      metadata: { name: 'demo' },
      status: {
        phase: 'Running',
        conditions: [
          condition('True', 'job "build" is waiting for workspace: waiting for PersistentWorkspace "w" to be bound'),
        ],
      },
    };
    assert.equal(
      summaryLine('demo', waiting as never),
      'demo: Running, job "build" is waiting for workspace: waiting for PersistentWorkspace "w" to be bound\n',
    );
    const free = {
      metadata: { name: 'demo' },
      status: { phase: 'Running', conditions: [condition('False', 'no job')] },
    };
    assert.equal(summaryLine('demo', free as never), 'demo: Running\n');
    assert.equal(summaryLine('demo', { metadata: {} }), 'demo: Pending\n');
  });
});
