import assert from 'node:assert/strict';
import { podEnv } from './pod-env.ts';

describe('bench/pod-env: the environment of a Runtime Server a bench starts locally', () => {
  it("drops the caller's locale (the node agent sets none), keeps the rest, and adds the extras", () => {
    const env = { PATH: '/bin', HOME: '/root', LANG: 'C.UTF-8', LANGUAGE: 'en', LC_ALL: 'de_DE.UTF-8', LC_CTYPE: 'C' };
    assert.deepEqual(podEnv(env, { KRT_RUNTIME_SOCKET: '/s' }), {
      PATH: '/bin',
      HOME: '/root',
      KRT_RUNTIME_SOCKET: '/s',
    });
  });

  it('lets an extra set a locale on purpose', () => {
    assert.deepEqual(podEnv({ LANG: 'C.UTF-8' }, { LANG: 'en_US.UTF-8' }), { LANG: 'en_US.UTF-8' });
  });
});
