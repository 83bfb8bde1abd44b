import assert from 'node:assert/strict';
import { UsageError } from '../kube.ts';
import { destination, selectArtifacts, type ArtifactItem } from './artifacts.ts';

const item = (name: string, type = 'file'): ArtifactItem => ({
  name,
  type,
  sizeBytes: 1,
  digest: `sha256:${'0'.repeat(64)}`,
});

describe('krt artifact download selection', () => {
  it('takes all artifacts, or the one named; unknown names are usage errors listing what exists', () => {
    const items = [item('dist.txt'), item('site', 'directory')];
    assert.deepEqual(
      selectArtifacts(items, undefined, 'r').map((i) => i.name),
      ['dist.txt', 'site'],
    );
    assert.deepEqual(
      selectArtifacts(items, 'site', 'r').map((i) => i.name),
      ['site'],
    );
    assert.throws(
      () => selectArtifacts(items, 'nope', 'r'),
      (e: unknown) => e instanceof UsageError && /has no artifact "nope"; it has dist.txt, site/.test(e.message),
    );
    assert.throws(() => selectArtifacts([], undefined, 'r'), UsageError);
  });

  it('refuses unsafe names from the server before touching the disk', () => {
    for (const bad of ['../evil', '/etc/passwd', 'a/b', '..'])
      assert.throws(() => selectArtifacts([item(bad)], undefined, 'r'), /unsafe artifact name/);
  });

  it('saves directories as <name>.tar.gz unless extracting', () => {
    assert.equal(destination('out', item('site', 'directory'), false), 'out/site.tar.gz');
    assert.equal(destination('out', item('site', 'directory'), true), 'out/site');
    assert.equal(destination('out', item('dist.txt'), true), 'out/dist.txt');
  });
});
