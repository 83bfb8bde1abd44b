import assert from 'node:assert/strict';
import { volumeRetryMs, withContainerTmp } from './pod-worker.ts';

describe('node agent volume setup retries (issue 17)', () => {
  it('retries a failed volume after 100 ms, doubling to 2 s (a token refused until the node authorizer saw the binding)', () => {
    assert.deepEqual(
      [0, 1, 2, 3, 4, 5, 6, 50].map((n) => volumeRetryMs(n)),
      [100, 200, 400, 800, 1600, 2000, 2000, 2000],
    );
  });
});

describe('node agent container /tmp', () => {
  const data = { hostPath: '/var/data', mountPath: '/data', readOnly: false };
  const own = (): string => '/pods/u1/tmp/c';

  it('gives a container its own /tmp; a checkout under the host /tmp stays visible above it', () => {
    assert.deepEqual(withContainerTmp([data], own, '/srv/repo'), [
      { hostPath: '/pods/u1/tmp/c', mountPath: '/tmp', readOnly: false },
      data,
    ]);
    assert.deepEqual(withContainerTmp([data], own, '/tmp/ci-check/'), [
      { hostPath: '/pods/u1/tmp/c', mountPath: '/tmp', readOnly: false },
      { hostPath: '/tmp/ci-check', mountPath: '/tmp/ci-check', readOnly: false },
      data,
    ]);
  });

  it("keeps a checkout under /tmp visible when the Pod mounts its own volume at /tmp (the component's emptyDir hid it: kruntimes not found in CI)", () => {
    const podTmp = { hostPath: '/pods/u1/volumes/tmp', mountPath: '/tmp/', readOnly: false };
    let made = false;
    const mounts = withContainerTmp([data, podTmp], () => ((made = true), '/unused'), '/tmp/ci-check');
    assert.deepEqual(mounts, [
      podTmp,
      { hostPath: '/tmp/ci-check', mountPath: '/tmp/ci-check', readOnly: false },
      data,
    ]);
    assert.equal(made, false, 'no private /tmp besides the volume');
  });
});
