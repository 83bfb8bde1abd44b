import assert from 'node:assert/strict';
import { loadServerConfig } from './config.ts';
import { loadFnServerConfig } from './fnserver.ts';

describe('extension server settings', () => {
  it('the API server and the function server read the same listening settings', () => {
    const env = { KRT_HTTPS_PORT: '9443', KRT_HEALTH_PORT: '9080', KRT_TLS_CERT: '/c', KRT_TLS_KEY: '/k' };
    const api = loadServerConfig(env);
    const fn = loadFnServerConfig(env);
    for (const c of [api, fn]) {
      assert.equal(c.httpsPort, 9443);
      assert.equal(c.healthPort, 9080);
      assert.equal(c.certFile, '/c');
      assert.equal(c.keyFile, '/k');
    }
  });

  it('the function server listens on the Pod IP, the API server on every address', () => {
    assert.equal(loadFnServerConfig({ POD_IP: '10.0.0.7' }).listenAddress, '10.0.0.7');
    assert.equal(loadServerConfig({ POD_IP: '10.0.0.7' }).listenAddress, '0.0.0.0');
  });

  it('refuses a port that is not one, naming the variable', () => {
    for (const load of [loadServerConfig, loadFnServerConfig]) {
      assert.throws(() => load({ KRT_HTTPS_PORT: 'https' }), /KRT_HTTPS_PORT must be a port number/);
      assert.throws(() => load({ KRT_HEALTH_PORT: '70000' }), /KRT_HEALTH_PORT must be a port number/);
    }
  });
});
