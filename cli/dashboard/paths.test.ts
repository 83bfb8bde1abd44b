import assert from 'node:assert/strict';
import { allowedRead, checkName, PathRefused } from './paths.ts';

describe('dashboard read allow-list', () => {
  it('forwards the kruntimes resources, Pods, Events and namespaces', () => {
    for (const p of [
      '/api/v1/namespaces',
      '/api/v1/namespaces/team-a/pods',
      '/api/v1/namespaces/team-a/events',
      '/apis/kruntimes.io/v1alpha1/namespaces/team-a/runs',
      '/apis/kruntimes.io/v1alpha1/namespaces/team-a/workflowruns/ci-x7k2',
      '/apis/dev.kruntimes.io/v1alpha1/namespaces/team-a/workspaces',
      '/apis/dev.kruntimes.io/v1alpha1/namespaces/team-a/operations/p1-create',
    ])
      assert.equal(allowedRead(p, { labelSelector: 'a=b' }).path, p);
  });
  it('refuses other paths, traversal and unknown query parameters', () => {
    for (const p of [
      '/api/v1/namespaces/team-a/secrets',
      '/api/v1/namespaces/team-a/pods/x/exec',
      '/apis/kruntimes.io/v1alpha1/namespaces/../secrets',
      '/apis/kruntimes.io/v1alpha1/runs',
      '/apis/dev.kruntimes.io/v1alpha1/workspaces',
      '/apis/dev.kruntimes.io/v1alpha1/namespaces/team-a/secrets',
      '/api/v1/nodes',
      undefined,
    ])
      assert.throws(() => allowedRead(p, {}), PathRefused);
    assert.throws(() => allowedRead('/api/v1/namespaces', { watch: 'true' }), /watch/);
    assert.throws(() => allowedRead('/api/v1/namespaces', { labelSelector: ['a', 'b'] }), PathRefused);
  });
  it('checks names', () => {
    assert.equal(checkName('namespace', 'team-a'), 'team-a');
    assert.throws(() => checkName('namespace', 'a/b'), PathRefused);
    assert.throws(() => checkName('run', '..'), PathRefused);
  });
});
