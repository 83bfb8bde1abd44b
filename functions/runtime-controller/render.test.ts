import assert from 'node:assert/strict';
import { podTemplate, RUNTIME_SOCKET_VOLUME, RUNTIMED_TOKEN_VOLUME, type Runtime } from './render.ts';

type Spec = {
  automountServiceAccountToken?: boolean;
  securityContext?: { fsGroup?: number };
  containers: {
    name: string;
    volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
    securityContext?: object;
  }[];
  volumes: { name: string; projected?: { sources: object[] }; emptyDir?: object }[];
};

const rt = (spec: Partial<Runtime['spec']> = {}): Runtime => ({
  metadata: { name: 'bash', namespace: 'team-a', uid: 'r1' },
  spec: {
    template: {
      spec: {
        containers: [
          {
            name: 'runtime',
            image: 'ghcr.io/kruntimes/bash-runtime:v1',
            volumeMounts: [
              { name: RUNTIMED_TOKEN_VOLUME, mountPath: '/steal' },
              { name: 'mine', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount' },
              { name: RUNTIME_SOCKET_VOLUME, mountPath: '/rw-socket' },
              { name: 'mine', mountPath: '/run/kruntimes' },
            ],
          },
          { name: 'sidecar', image: 'busybox', volumeMounts: [{ name: 'artifact-store', mountPath: '/store' }] },
        ],
        volumes: [{ name: RUNTIMED_TOKEN_VOLUME, emptyDir: {} }],
      },
    },
    ...spec,
  },
});

describe('runtime-controller Pod template credentials', () => {
  const spec = (podTemplate(rt()) as { spec: Spec }).spec;
  const container = (n: string): Spec['containers'][number] => spec.containers.find((c) => c.name === n)!;

  it('automounts no ServiceAccount token into the Pod', () => {
    assert.equal(spec.automountServiceAccountToken, false);
  });

  it("mounts runtimed's projected token into runtimed's container only", () => {
    const tokenVolumes = spec.volumes.filter((v) => v.name === RUNTIMED_TOKEN_VOLUME);
    assert.equal(tokenVolumes.length, 1, "the template's own volume of that name is dropped");
    assert.ok(tokenVolumes[0]?.projected?.sources.some((s) => 'serviceAccountToken' in s));
    assert.deepEqual(
      container('runtimed').volumeMounts?.find((m) => m.name === RUNTIMED_TOKEN_VOLUME)?.mountPath,
      '/var/run/secrets/kubernetes.io/serviceaccount',
    );
    for (const name of ['runtime', 'sidecar']) {
      const mounts = container(name).volumeMounts ?? [];
      assert.ok(!mounts.some((m) => m.name === RUNTIMED_TOKEN_VOLUME || m.name === 'artifact-store'), name);
      assert.ok(!mounts.some((m) => m.mountPath.startsWith('/var/run/secrets/kubernetes.io/serviceaccount')), name);
    }
  });

  it('runs runtimed as its own non-root uid and shares the workspace through the fsGroup', () => {
    assert.deepEqual(container('runtimed').securityContext, {
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      runAsUser: 65532,
      runAsGroup: 65532,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
    assert.equal(spec.securityContext?.fsGroup, 65532);
  });

  it('puts the Runtime Server socket in its own emptyDir, writable by runtimed only (issue 11 d)', () => {
    assert.deepEqual(
      spec.volumes.filter((v) => v.name === RUNTIME_SOCKET_VOLUME),
      [{ name: RUNTIME_SOCKET_VOLUME, emptyDir: {} }],
    );
    const socketMounts = (n: string): object[] =>
      (container(n).volumeMounts ?? []).filter(
        (m) => m.name === RUNTIME_SOCKET_VOLUME || m.mountPath === '/run/kruntimes',
      );
    assert.deepEqual(socketMounts('runtimed'), [{ name: RUNTIME_SOCKET_VOLUME, mountPath: '/run/kruntimes' }]);
    assert.deepEqual(socketMounts('runtime'), [
      { name: RUNTIME_SOCKET_VOLUME, mountPath: '/run/kruntimes', readOnly: true },
    ]);
    assert.deepEqual(socketMounts('sidecar'), []);
  });
});
