import assert from 'node:assert/strict';
import net from 'node:net';
import { armExitWatchdog, leftovers } from './exit-watchdog.ts';

describe('e2e exit watchdog', () => {
  it('counts what is still open by kind, leaving out timers', () => {
    assert.equal(
      leftovers(['TCPServerWrap', 'Timeout', 'TCPSocketWrap', 'TCPServerWrap']),
      'TCPServerWrap × 2, TCPSocketWrap × 1',
    );
    assert.equal(leftovers(['Timeout']), '');
  });

  it('fails the run, naming the server a spec left listening, when the process has not exited in time', async () => {
    const srv = net.createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    const lines: string[] = [];
    const exited = new Promise<number>((resolve) =>
      armExitWatchdog(20, {
        resources: () => process.getActiveResourcesInfo(),
        write: (l) => lines.push(l),
        exit: resolve,
      }),
    );
    try {
      assert.equal(await exited, 1);
      assert.match(lines[0] ?? '', /did not exit 0.02 s after its teardown; still open: .*TCPServerWrap/);
    } finally {
      srv.close();
    }
  });

  it("does not keep a finished process alive: its timer is unref'd", () => {
    const timer = armExitWatchdog(60_000, {
      resources: () => [],
      write: () => undefined,
      exit: () => assert.fail('exit'),
    });
    try {
      assert.equal(timer.hasRef(), false);
    } finally {
      clearTimeout(timer);
    }
  });
});
