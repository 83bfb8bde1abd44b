import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const LAUNCHER = join(dirname(fileURLToPath(import.meta.url)), 'launch.sh');

/** launch.sh in a private mount namespace, as the node agent runs it (needs root, as the agent does). */
function launch(mounts: [string, string, string][], argv: string[]): string {
  assert.equal(process.getuid?.(), 0, 'the node agent and this test run as root (mount namespaces)');
  return execFileSync('unshare', ['--mount', '--propagation', 'private', 'sh', LAUNCHER, '/', ...argv], {
    env: { ...process.env, KRT_MOUNTS: mounts.map((m) => m.join('\t')).join('\n') },
    encoding: 'utf8',
  });
}

describe('nodeagent launch.sh', () => {
  let dir: string;
  beforeEach(() => {
    // Under the host's /tmp, like an environment cloned there (CI): the container's own /tmp,
    // mounted first, must not hide the sources of the volumes mounted after it.
    dir = mkdtempSync(join(tmpdir(), 'krt-launch-'));
    mkdirSync(join(dir, 'ctmp'));
    mkdirSync(join(dir, 'vol'));
    writeFileSync(join(dir, 'vol', 'data.txt'), 'volume data');
    writeFileSync(join(dir, 'token'), 'a token');
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
    rmSync('/krt-launch-test', { recursive: true, force: true }); // the mount points it created
  });

  it('mounts every volume even when an earlier mount (/tmp) covers the later sources', () => {
    const out = launch(
      [
        [join(dir, 'ctmp'), '/tmp', 'rw'],
        [join(dir, 'vol'), '/krt-launch-test/data', 'ro'],
        [join(dir, 'token'), '/krt-launch-test/token', 'ro'],
      ],
      ['sh', '-c', 'cat /krt-launch-test/data/data.txt; echo; cat /krt-launch-test/token; echo; ls -A /tmp; echo end'],
    );
    assert.equal(out, 'volume data\na token\nend\n');
  });

  it('re-exposes a host path under /tmp above the container /tmp (a checkout cloned there)', () => {
    const out = launch(
      [
        [join(dir, 'ctmp'), '/tmp', 'rw'],
        [dir, dir, 'rw'],
      ],
      ['sh', '-c', `cat ${join(dir, 'vol', 'data.txt')}; echo; ls -A /tmp`],
    );
    assert.equal(out, `volume data\n${dir.slice('/tmp/'.length).split('/')[0]}\n`);
  });

  it('mounts read-only volumes read-only', () => {
    assert.throws(
      () =>
        launch([[join(dir, 'vol'), '/krt-launch-test/data', 'ro']], ['sh', '-c', 'echo x > /krt-launch-test/data/y']),
      /Read-only file system/,
    );
  });
});
