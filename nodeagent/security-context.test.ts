import assert from 'node:assert/strict';
import type { Container, Pod } from './pod-types.ts';
import { containerIdentity, podFsUser, setprivArgs, verifyRunAsNonRoot } from './security-context.ts';

const pod = (sc?: Pod['spec']['securityContext']): Pod => ({
  metadata: { name: 'p', namespace: 'ns', uid: 'u1' },
  spec: { containers: [], ...(sc ? { securityContext: sc } : {}) },
});
const c = (sc?: Container['securityContext']): Container => ({
  name: 'c',
  image: 'x',
  ...(sc ? { securityContext: sc } : {}),
});

describe('node agent runAsNonRoot (kubelet verifyRunAsNonRoot)', () => {
  it('lets anything run without runAsNonRoot', () => {
    assert.equal(verifyRunAsNonRoot(pod(), c(), undefined), undefined);
    assert.equal(verifyRunAsNonRoot(pod(), c({ runAsNonRoot: false }), '0'), undefined);
  });
  it("refuses an image that declares no user or root, with the kubelet's message", () => {
    assert.match(
      verifyRunAsNonRoot(pod(), c({ runAsNonRoot: true }), undefined) ?? '',
      /^container has runAsNonRoot and image will run as root \(pod: "p_ns\(u1\)", container: c\)$/,
    );
    assert.match(verifyRunAsNonRoot(pod({ runAsNonRoot: true }), c(), '0:0') ?? '', /image will run as root/);
  });
  it('refuses a non-numeric image user it cannot verify', () => {
    assert.match(verifyRunAsNonRoot(pod(), c({ runAsNonRoot: true }), 'app') ?? '', /non-numeric user \(app\)/);
  });
  it('accepts a non-root image user, and runAsUser overrides the image', () => {
    assert.equal(verifyRunAsNonRoot(pod(), c({ runAsNonRoot: true }), '65532:65532'), undefined);
    assert.equal(verifyRunAsNonRoot(pod({ runAsUser: 1000 }), c({ runAsNonRoot: true }), undefined), undefined);
    assert.match(
      verifyRunAsNonRoot(pod({ runAsNonRoot: true }), c({ runAsUser: 0 }), '65532') ?? '',
      /runAsUser breaks non-root policy/,
    );
  });
  it('a container setting overrides the Pod setting', () => {
    assert.equal(verifyRunAsNonRoot(pod({ runAsNonRoot: true }), c({ runAsNonRoot: false }), undefined), undefined);
  });
});

describe('node agent container identity (runAsUser/runAsGroup, fsGroup, image USER)', () => {
  const withSc = (p: Pod['spec']['securityContext'], cs: Container['securityContext'][]): Pod => ({
    metadata: { name: 'p', namespace: 'ns', uid: 'u1' },
    spec: {
      containers: cs.map((sc, i) => ({ name: `c${i}`, image: 'x', ...(sc ? { securityContext: sc } : {}) })),
      ...(p ? { securityContext: p } : {}),
    },
  });

  it("runs as the image's USER when nothing else is set, and as root when the image declares none", () => {
    assert.deepEqual(containerIdentity(pod(), c(), '1000:1000'), {
      uid: 1000,
      gid: 1000,
      groups: [],
      noNewPrivs: false,
    });
    assert.deepEqual(containerIdentity(pod(), c(), '65532'), { uid: 65532, gid: 0, groups: [], noNewPrivs: false });
    assert.deepEqual(containerIdentity(pod(), c(), undefined), { uid: 0, gid: 0, groups: [], noNewPrivs: false });
  });

  it('takes runAsUser/runAsGroup from the container, else the Pod, and fsGroup/supplementalGroups as groups', () => {
    const p = pod({ runAsUser: 7, runAsGroup: 8, fsGroup: 65532, supplementalGroups: [5, 65532] });
    assert.deepEqual(containerIdentity(p, c(), '1000:1000'), { uid: 7, gid: 8, groups: [65532, 5], noNewPrivs: false });
    const sc = { runAsUser: 65532, runAsGroup: 65532, allowPrivilegeEscalation: false };
    assert.deepEqual(containerIdentity(p, c(sc), undefined), { uid: 65532, gid: 65532, groups: [5], noNewPrivs: true });
    // runAsUser naming another uid than the image's: the image's group does not apply.
    assert.deepEqual(containerIdentity(pod({ runAsUser: 9 }), c(), '1000:1000'), {
      uid: 9,
      gid: 0,
      groups: [],
      noNewPrivs: false,
    });
  });

  it('refuses a non-numeric image user it cannot resolve, unless runAsUser is set', () => {
    assert.match(containerIdentity(pod(), c(), 'app') as string, /not numeric/);
    assert.equal(typeof containerIdentity(pod({ runAsUser: 3 }), c(), 'app'), 'object');
  });

  it("the Pod's fsUser is the runAsUser all its containers share", () => {
    assert.equal(podFsUser(withSc({ runAsUser: 65532 }, [undefined, undefined])), 65532);
    assert.equal(podFsUser(withSc(undefined, [{ runAsUser: 1 }, { runAsUser: 1 }])), 1);
    assert.equal(podFsUser(withSc(undefined, [{ runAsUser: 1 }, undefined])), undefined);
    assert.equal(podFsUser(withSc({ runAsUser: 2 }, [{ runAsUser: 1 }, undefined])), undefined);
  });

  it('switches with setpriv after the mounts, and leaves root containers alone', () => {
    assert.deepEqual(setprivArgs({ uid: 0, gid: 0, groups: [], noNewPrivs: false }), []);
    assert.deepEqual(setprivArgs({ uid: 1000, gid: 1000, groups: [65532], noNewPrivs: true }), [
      'setpriv',
      '--reuid=1000',
      '--regid=1000',
      '--groups=65532',
      '--no-new-privs',
      '--pdeathsig',
      'KILL',
      '--',
    ]);
    assert.deepEqual(setprivArgs({ uid: 1000, gid: 1000, groups: [], noNewPrivs: false }).slice(3), [
      '--clear-groups',
      '--pdeathsig',
      'KILL',
      '--',
    ]);
  });
});
