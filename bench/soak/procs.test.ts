import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { containerPids, processStart, processStartedAtMs, stillRunning, type PodLite } from './procs.ts';

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

  it('keeps a pid only while its process started when the container did (a finished one names a reusable pid)', () => {
    const at = (t: string): { startedAt: string } => ({ startedAt: t });
    const pod: PodLite = {
      metadata: { name: 'job-k8s-842' },
      spec: {},
      status: {
        containerStatuses: [
          { name: 'job', state: { terminated: at('2026-12-02T08:24:20Z') } },
          { name: 'side', state: { running: at('2026-12-02T08:24:20Z') } },
          { name: 'new', state: {} },
        ],
      },
    };
    const starts: Record<number, number> = {
      28818: Date.parse('2026-12-02T08:27:15Z'), // a restarted component that got the pid
      4242: Date.parse('2026-12-02T08:24:21Z'),
      7: Date.parse('2026-12-02T08:24:20Z'),
    };
    const pids = { job: 28818, side: 4242, new: 7 };
    assert.deepEqual(
      containerPids(pod, pids, (p) => starts[p]),
      { side: 4242, new: 7 },
    );
    starts[28818] = Date.parse('2026-12-02T08:24:22Z');
    assert.deepEqual(
      containerPids(pod, pids, (p) => starts[p]),
      pids,
      'a finished container still running is kept',
    );
  });

  it('tells when this process started, in epoch ms', () => {
    const ms = processStartedAtMs(process.pid) ?? 0;
    assert.ok(ms <= Date.now() && ms > Date.now() - 3_600_000, String(ms));
  });

  it('reads its own start time (the fields after the parenthesised command name)', () => {
    assert.match(processStart(process.pid) ?? '', /^\d+$/);
  });
});
