import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ArtifactFinisher } from './artifact-finisher.ts';
import { ArtifactError } from './artifacts/errors.ts';
import { openDirBeneath } from './artifacts/safe-dir.ts';
import type { ArtifactStore, RuntimeArtifactStoreSpec } from './artifacts/index.ts';
import type { Run } from './types.ts';

/** A store whose every put fails with a system error of the given code (as fs/promises throws it). */
function failingStore(code: string): ArtifactStore {
  const cause = Object.assign(new Error(`${code}: refused`), { code });
  return {
    driver: 'filesystem',
    put: () =>
      Promise.reject(new ArtifactError('ArtifactStoreError', `cannot create "namespaces": ${code}`, { cause })),
    deleteRun: () => Promise.resolve(),
  } as unknown as ArtifactStore;
}

describe('runtimed ArtifactFinisher store failures', () => {
  let base: string;
  const run = { metadata: { name: 'r', namespace: 'ns', uid: 'u1' }, spec: {} } as unknown as Run;
  before(async () => {
    base = await mkdtemp(join(tmpdir(), 'krt-finisher-'));
    await mkdir(join(base, 'run', 'artifacts'), { recursive: true });
    await writeFile(join(base, 'run', 'artifacts', 'a.txt'), 'x');
  });
  after(() => rm(base, { recursive: true, force: true }));

  async function collectWith(code: string): Promise<unknown> {
    const spec = { driver: 'filesystem' } as RuntimeArtifactStoreSpec;
    const f = new ArtifactFinisher(base, failingStore(code), spec, 'bash', { beforeUpload: () => Promise.resolve() });
    const dir = await openDirBeneath(base, ['run']);
    try {
      return await f.collect(run, dir!);
    } finally {
      await dir!.close();
    }
  }

  it('a store that refuses runtimed (EACCES, EPERM, EROFS) fails the Run instead of retrying forever', async () => {
    for (const code of ['EACCES', 'EPERM', 'EROFS']) {
      const r = (await collectWith(code)) as { ok: boolean; transient?: boolean; reason: string; message: string };
      assert.equal(r.ok, false, code);
      assert.equal(r.transient, false, `${code} is not transient`);
      assert.equal(r.reason, 'ArtifactStoreError', code);
      assert.match(r.message, new RegExp(code));
    }
  });

  it('an I/O failure of the store stays transient (retried)', async () => {
    const r = (await collectWith('EIO')) as { ok: boolean; transient?: boolean; reason: string };
    assert.deepEqual([r.ok, r.transient, r.reason], [false, true, 'ArtifactStoreError']);
  });
});
