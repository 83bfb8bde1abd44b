import assert from 'node:assert/strict';
import { HOST_IMAGES } from '../nodeagent/images.ts';
import { TOOLCHAIN_IMAGES, toolchainConfig } from './kubelet-images.ts';

describe('kubelet kind toolchain images', () => {
  it('are the node agent toolchain images, with the same cmd', () => {
    assert.deepEqual(TOOLCHAIN_IMAGES.map((t) => t.repository).sort(), Object.keys(HOST_IMAGES).sort());
    for (const t of TOOLCHAIN_IMAGES) assert.deepEqual(t.cmd, HOST_IMAGES[t.repository]?.cmd, t.repository);
  });

  it('run as root like upstream images (no USER), with the base PATH', () => {
    const c = toolchainConfig(['bash'], ['sha256:x']) as { config: { User?: string; Env: string[]; Cmd: string[] } };
    assert.equal(c.config.User, undefined);
    assert.ok(c.config.Env.some((e) => e.startsWith('PATH=/usr/local/sbin:')));
    assert.deepEqual(c.config.Cmd, ['bash']);
  });

  it('carry the tags the specs name', () => {
    const refs = TOOLCHAIN_IMAGES.flatMap((t) => t.tags.map((tag) => `${t.repository}:${tag}`));
    for (const r of ['docker.io/library/bash:5', 'docker.io/library/python:3.12', 'docker.io/library/busybox:1.36'])
      assert.ok(refs.includes(r), r);
  });
});
