import assert from 'node:assert/strict';
import { containerMounts, volumeRetryMs } from './pod-worker.ts';

describe('node agent volume setup retries (issue 17)', () => {
  it('retries a failed volume after 100 ms, doubling to 2 s (a token refused until the node authorizer saw the binding)', () => {
    assert.deepEqual(
      [0, 1, 2, 3, 4, 5, 6, 50].map((n) => volumeRetryMs(n)),
      [100, 200, 400, 800, 1600, 2000, 2000, 2000],
    );
  });
});

describe('node agent container mounts: a checkout under /tmp stays visible (issue 14)', () => {
  const own = { hostPath: '/pods/p/tmp/c', mountPath: '/tmp', readOnly: false };
  const data = { hostPath: '/pods/p/volumes/data', mountPath: '/var/lib/data', readOnly: false };
  const podTmp = { hostPath: '/pods/p/volumes/tmp', mountPath: '/tmp', readOnly: false };
  const keep = { hostPath: '/tmp/ci/repo', mountPath: '/tmp/ci/repo', readOnly: false };
  const paths = (ms: { mountPath: string }[]): string[] => ms.map((m) => m.mountPath);

  it("binds the checkout back after the Pod's own volume at /tmp (the devws Git Server's emptyDir)", () => {
    assert.deepEqual(containerMounts([data, podTmp], own, '/tmp/ci/repo/'), [data, podTmp, keep]);
  });

  it("binds it back after the container's own /tmp, before a volume mounted inside it", () => {
    const inside = { hostPath: '/pods/p/volumes/x', mountPath: '/tmp/ci/repo/x', readOnly: true };
    assert.deepEqual(paths(containerMounts([inside, data], own, '/tmp/ci/repo')), [
      '/tmp',
      '/var/lib/data',
      '/tmp/ci/repo',
      '/tmp/ci/repo/x',
    ]);
  });

  it('needs nothing for a checkout elsewhere', () => {
    assert.deepEqual(containerMounts([data], own, '/srv/repo'), [own, data]);
    assert.deepEqual(containerMounts([podTmp], own, '/srv/repo'), [podTmp]);
  });
});
