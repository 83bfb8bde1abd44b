import assert from 'node:assert/strict';
import { volumeRetryMs } from './pod-worker.ts';

describe('node agent volume setup retries (issue 17)', () => {
  it('retries a failed volume after 100 ms, doubling to 2 s (a token refused until the node authorizer saw the binding)', () => {
    assert.deepEqual(
      [0, 1, 2, 3, 4, 5, 6, 50].map((n) => volumeRetryMs(n)),
      [100, 200, 400, 800, 1600, 2000, 2000, 2000],
    );
  });
});
