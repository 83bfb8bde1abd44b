import assert from 'node:assert/strict';
import { gitProcessEnv } from './source.ts';

describe('runtimed git environment (issue 11 item 6)', () => {
  it("keeps the artifact store's credentials and unsafe GIT_* variables out of git", () => {
    const env = gitProcessEnv({
      PATH: '/usr/bin',
      HOME: '/home/runtimed',
      AWS_ACCESS_KEY_ID: 'AKIA',
      AWS_SECRET_ACCESS_KEY: 'secret',
      KRT_ARTIFACT_STORE: '{"driver":"s3"}',
      GIT_SSH_COMMAND: 'sh -c "env > /workspace/leak"',
      GIT_SSL_CAINFO: '/etc/ssl/ca.crt',
      HTTPS_PROXY: 'http://proxy:3128',
      no_proxy: 'localhost',
    });
    assert.deepEqual(env, {
      PATH: '/usr/bin',
      HOME: '/home/runtimed',
      GIT_SSL_CAINFO: '/etc/ssl/ca.crt',
      HTTPS_PROXY: 'http://proxy:3128',
      no_proxy: 'localhost',
    });
  });
});
