import assert from 'node:assert/strict';
import type { KubeObject } from '../kube/types.ts';
import { fetchRefs, withFetched } from './fetch.ts';
import { R } from './resources.ts';
import type { State } from './types.ts';

const secret = (ns: string, name: string, labels: Record<string, string> = {}): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { namespace: ns, name, labels },
});
const cm = secret('a', 'cached');
const cached: State = {
  get: (r, ns, name) =>
    r === R.configMaps && ns === 'a' && name === 'cached' ? cm : r === R.secrets ? secret(ns ?? '', name) : undefined,
  list: (r) => (r === R.configMaps ? [cm] : [secret('z', 'stale')]),
};

describe('fn live reads (WatchTrigger.fetch)', () => {
  it('GETs each distinct ref once and records missing objects', async () => {
    const seen: string[] = [];
    const got = await fetchRefs(
      async (p) => {
        seen.push(p);
        return Promise.resolve(p.endsWith('/gone') ? undefined : secret('a', p.split('/').pop() ?? ''));
      },
      [
        { resource: R.secrets, namespace: 'a', name: 'k' },
        { resource: R.secrets, namespace: 'a', name: 'k' },
        { resource: R.secrets, namespace: 'b', name: 'gone' },
      ],
    );
    assert.deepEqual(seen, ['/api/v1/namespaces/a/secrets/k', '/api/v1/namespaces/b/secrets/gone']);
    assert.deepEqual([...got.keys()], seen);
    assert.equal(got.get('/api/v1/namespaces/b/secrets/gone'), undefined);
    await assert.rejects(
      fetchRefs(() => Promise.reject(new Error('forbidden')), [{ resource: R.secrets, namespace: 'a', name: 'k' }]),
      /forbidden/,
    );
  });

  it('answers fetched kinds only from the GETs and other kinds from the cache', async () => {
    const got = await fetchRefs(
      (p) => Promise.resolve(p.includes('/b/') ? undefined : secret('a', 'k', { x: '1' })),
      [
        { resource: R.secrets, namespace: 'a', name: 'k' },
        { resource: R.secrets, namespace: 'b', name: 'k' },
      ],
    );
    const s = withFetched(cached, [R.secrets], got);
    assert.equal(s.get(R.secrets, 'a', 'k')?.metadata.labels?.x, '1');
    assert.equal(s.get(R.secrets, 'b', 'k'), undefined, 'fetched as missing');
    assert.equal(
      s.get(R.secrets, 'c', 'never-named'),
      undefined,
      'not named by the function: absent, never read from a cache',
    );
    assert.deepEqual(
      s.list(R.secrets).map((o) => o.metadata.name),
      ['k'],
    );
    assert.deepEqual(s.list(R.secrets, 'b'), []);
    assert.equal(s.get(R.configMaps, 'a', 'cached'), cm);
    assert.deepEqual(s.list(R.configMaps), [cm]);
  });
});
