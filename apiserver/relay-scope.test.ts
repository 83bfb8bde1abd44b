import assert from 'node:assert/strict';
import { loadFunctions, watchFunctions } from './functions.ts';
import { cachedCopy } from './relay.ts';
import { resourcePath } from '../lib/fn/types.ts';

/** Kinds anyone with namespace write access can create in bulk: never cached unselected. */
const USER_KINDS = ['/api/v1/configmaps', '/api/v1/secrets', '/api/v1/pods'];

describe('watch relay cache scope (issue 11 item 4)', () => {
  it('no watch function caches Secrets or ConfigMaps, and user-creatable kinds only narrowed by a label', async () => {
    const problems: string[] = [];
    for (const fn of watchFunctions(await loadFunctions())) {
      const informers = [
        { resource: fn.trigger.resource, labelSelector: fn.trigger.labelSelector },
        ...(fn.trigger.also ?? []),
      ];
      for (const i of informers) {
        const path = resourcePath(i.resource);
        if (path === '/api/v1/secrets') problems.push(`${fn.name} watches Secrets`);
        if (USER_KINDS.includes(path) && !i.labelSelector) problems.push(`${fn.name} caches every ${path}`);
      }
      // ConfigMaps a handler needs are read by name, never listed.
      const needsConfigMaps = fn.rbac.some((r) => r.resources.includes('configmaps') && r.verbs.includes('list'));
      if (needsConfigMaps && fn.name.startsWith('jobclass-')) problems.push(`${fn.name} may list ConfigMaps`);
    }
    assert.deepEqual(problems, []);
  });

  it('stores objects without managedFields', () => {
    const o = {
      metadata: { name: 'a', namespace: 'n', managedFields: [{ manager: 'x', fieldsV1: { big: true } }] },
      data: { k: 'v' },
    };
    assert.deepEqual(cachedCopy(o), { metadata: { name: 'a', namespace: 'n' }, data: { k: 'v' } });
    assert.equal(o.metadata.managedFields.length, 1, 'the input is not mutated');
    const plain = { metadata: { name: 'b' } };
    assert.equal(cachedCopy(plain), plain);
  });
});
