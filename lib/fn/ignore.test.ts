import assert from 'node:assert/strict';
import { FakeState } from './fake-state.ts';
import { withoutIgnored } from './ignore.ts';
import { R } from './resources.ts';
import type { KubeObject } from '../kube/types.ts';

const run = (name: string, phase: string, runtime = 'bash'): KubeObject => ({
  metadata: { name, namespace: 'ns' },
  spec: { runtime },
  status: { phase },
});

describe('withoutIgnored (WatchTrigger.ignore)', () => {
  const base = new FakeState([
    [R.runs, run('a', 'Pending')],
    [R.runs, run('b', 'Succeeded')],
    [R.runs, run('c', 'Pending', 'python')],
    [R.runtimes, { metadata: { name: 'bash', namespace: 'ns' } }],
  ]);
  type RunLike = KubeObject & { spec: { runtime: string }; status: { phase: string } };
  const ignored = (o: KubeObject, key: string): boolean =>
    (o as RunLike).status.phase === 'Succeeded' || `ns/${(o as RunLike).spec.runtime}` !== key;
  const state = withoutIgnored(base, [{ resource: R.runs, when: ignored }], 'ns/bash');

  it('lists and gets without the ignored objects of the kind, given the key', () => {
    assert.deepEqual(
      state.list(R.runs, 'ns').map((o) => o.metadata.name),
      ['a'],
    );
    assert.equal(state.get(R.runs, 'ns', 'a')?.metadata.name, 'a');
    assert.equal(state.get(R.runs, 'ns', 'b'), undefined);
    assert.equal(state.get(R.runs, 'ns', 'c'), undefined);
  });

  it('leaves other kinds as they are', () => {
    assert.equal(state.get(R.runtimes, 'ns', 'bash')?.metadata.name, 'bash');
    assert.equal(state.list(R.runtimes).length, 1);
  });
});
