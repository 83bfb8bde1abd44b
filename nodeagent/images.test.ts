import assert from 'node:assert/strict';
import { effectiveArgv, imageRepository, resolveImage } from './images.ts';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

describe('node agent images', () => {
  it('normalises image references to repositories', () => {
    assert.equal(imageRepository('bash'), 'docker.io/library/bash');
    assert.equal(imageRepository('bash:5.2'), 'docker.io/library/bash');
    assert.equal(imageRepository('library/python:3.12'), 'docker.io/library/python');
    assert.equal(imageRepository('ghcr.io/kruntimes/kruntimes:dev'), 'ghcr.io/kruntimes/kruntimes');
    assert.equal(imageRepository('localhost:5000/x/y@sha256:abc'), 'localhost:5000/x/y');
  });

  it('maps project images to their local entrypoints and refuses unknown ones with a reason', () => {
    const ok = resolveImage('ghcr.io/kruntimes/kruntimes:v1', REPO_ROOT);
    assert.ok(ok.ok);
    assert.deepEqual(ok.config.entrypoint, ['kruntimes']);
    assert.match(ok.config.path[0] ?? '', /images\/kruntimes\/bin$/);
    const missing = resolveImage('ghcr.io/kruntimes/nope:v1', REPO_ROOT);
    assert.ok(!missing.ok && missing.reason === 'ImageNotRunnable' && /no local entrypoint/.test(missing.message));
    const other = resolveImage('nginx', REPO_ROOT);
    assert.ok(!other.ok && /cannot be run by the kruntimes node agent/.test(other.message));
  });

  it('applies command/args over entrypoint/cmd like Kubernetes', () => {
    const cfg = { entrypoint: ['ep'], cmd: ['c1'], env: {}, path: [] };
    assert.deepEqual(effectiveArgv(cfg), ['ep', 'c1']);
    assert.deepEqual(effectiveArgv(cfg, undefined, ['a']), ['ep', 'a']);
    assert.deepEqual(effectiveArgv(cfg, ['x'], undefined), ['x']);
    assert.deepEqual(effectiveArgv(cfg, ['x'], ['y']), ['x', 'y']);
  });
});
