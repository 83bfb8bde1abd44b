import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { processStart, stillRunning } from './procs.ts';

describe('soak procs: a process is its pid and its start time', () => {
  it('tells a running process from one that ended (whose pid may be given to another)', async () => {
    const child = spawn('sleep', ['30']);
    const pid = child.pid ?? 0;
    const start = processStart(pid);
    assert.match(start ?? '', /^\d+$/);
    assert.equal(stillRunning({ pid, start: start ?? '' }), true);
    assert.equal(stillRunning({ pid, start: `${start ?? ''}1` }), false, 'another process with the same pid');
    child.kill('SIGKILL');
    await once(child, 'exit');
    assert.equal(stillRunning({ pid, start: start ?? '' }), false);
    assert.equal(processStart(pid), undefined);
  });

  it('reads its own start time (the fields after the parenthesised command name)', () => {
    assert.match(processStart(process.pid) ?? '', /^\d+$/);
  });
});
