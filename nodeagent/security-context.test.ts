import assert from 'node:assert/strict';
import type { Container, Pod } from './pod-types.ts';
import { verifyRunAsNonRoot } from './security-context.ts';

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
