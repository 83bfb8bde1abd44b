import assert from 'node:assert/strict';
import { startedSince } from './environment.ts';

describe('localenv up(): what a failed start stops', () => {
  it('is what the start started or restarted, never what it found running', () => {
    const before = { etcd: 10, 'kube-apiserver': 11 };
    const now = { etcd: 10, 'kube-apiserver': 21, 'kube-controller-manager': 22 };
    assert.deepEqual(startedSince(before, now).sort(), ['kube-apiserver', 'kube-controller-manager']);
    assert.deepEqual(startedSince({}, {}), []);
    assert.deepEqual(startedSince(before, before), []);
  });
});
