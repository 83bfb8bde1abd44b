import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { withDirBeneath } from './artifacts/safe-dir.ts';
import { checkCommitSHA, gitProcessEnv, inlineFileSegments, prepareSource, PrepareError } from './source.ts';

describe('runtimed source staging (issue 11 items 2 and 12)', () => {
  it('accepts hex commit ids only, so commitSHA can never become a git option', () => {
    for (const ok of [undefined, '', 'abc1234', 'a'.repeat(40), 'A'.repeat(64)]) checkCommitSHA(ok);
    for (const bad of ['--upload-pack=touch /tmp/pwned', '-q', 'main', 'abc123', 'a'.repeat(65), 'abc1234 x', 'HEAD'])
      assert.throws(
        () => checkCommitSHA(bad),
        (e: unknown) => e instanceof PrepareError && /is not a hexadecimal commit id/.test(e.message),
        bad,
      );
  });

  it('refuses an inlinePath that leaves the Run directory', () => {
    assert.deepEqual(inlineFileSegments({ inlinePath: 'src/./main.py' }, 'function'), ['src', 'main.py']);
    assert.deepEqual(inlineFileSegments({ inlinePath: '../x' }, 'task'), ['script']);
    for (const bad of ['../../etc/x', 'a/../../b', '/', '..'])
      assert.throws(() => inlineFileSegments({ inlinePath: bad }, 'function'), /must be a relative path/, bad);
  });

  it('writes the inline script without following a link planted in its place', async () => {
    const root = await mkdtemp(join(tmpdir(), 'krt-source-'));
    try {
      await withDirBeneath(root, ['uid'], { create: 0o755 }, async (dir) => {
        await prepareSource(dir, join(root, 'uid'), { inline: 'echo hi' }, 'task');
        assert.equal(await readFile(join(root, 'uid', 'script'), 'utf8'), 'echo hi');
        await writeFile(join(root, 'outside'), 'keep');
        await rm(join(root, 'uid', 'script'));
        await symlink(join(root, 'outside'), join(root, 'uid', 'script'));
        await assert.rejects(
          prepareSource(dir, join(root, 'uid'), { inline: 'echo pwned' }, 'task'),
          /prepare source: write inline: ELOOP/,
        );
      });
      assert.equal(await readFile(join(root, 'outside'), 'utf8'), 'keep');
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});

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
