import assert from 'node:assert/strict';
import { GiveUp, waitFor } from './process.ts';

describe('localenv waitFor', () => {
  it('keeps polling while the check throws an ordinary error, until it holds', async () => {
    let calls = 0;
    await waitFor(
      'a flaky check',
      () => {
        calls++;
        if (calls < 3) return Promise.reject(new Error('connection refused'));
        return Promise.resolve(true);
      },
      60_000,
    );
    assert.equal(calls, 3);
  });

  it('ends the wait at once with the reason when the check gives up (the process exited)', async () => {
    let calls = 0;
    await assert.rejects(
      waitFor(
        'etcd to become healthy',
        () => {
          calls++;
          return Promise.reject(new GiveUp('etcd exited; see etcd.log'));
        },
        60_000,
      ),
      /etcd exited; see etcd\.log/,
    );
    assert.equal(calls, 1, 'not polled again after giving up');
  });

  it('times out with what it waited for', async () => {
    await assert.rejects(
      waitFor('nothing', () => Promise.resolve(false), 150),
      /timed out after 0s waiting for nothing/,
    );
  });
});
