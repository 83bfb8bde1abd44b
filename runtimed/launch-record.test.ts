import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, renameSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '../lib/fs/temp-dir.ts';
import { openDirBeneath } from './artifacts/safe-dir.ts';
import { markLaunched, resumeRun, type ResumeContext } from './launch-record.ts';
import type { Run } from './types.ts';

describe('launch record (resume after a runtimed restart)', () => {
  const BORN = Date.parse('2026-12-02T05:00:00Z');
  const run = (created: string, attempt = 1): Run => ({
    metadata: { name: 'r', namespace: 'ns', uid: 'u1', creationTimestamp: created },
    spec: { runtime: 'bash' },
    status: { phase: 'Scheduled', attempt },
  });
  const older = '2026-12-02T04:59:00Z';

  function context(hasExecution = false): ResumeContext & { root: string } {
    const root = tempDir('launch-record-');
    return {
      root,
      bornAt: BORN,
      hasExecution: () => Promise.resolve(hasExecution),
      workspaceRoot: root,
      runDirSegments: ['runs', 'u1'],
    };
  }
  async function launched(c: ReturnType<typeof context>, attempt: number): Promise<void> {
    const dir = await openDirBeneath(c.root, c.runDirSegments, { create: 0o775 });
    assert.ok(dir);
    await markLaunched(dir, attempt);
    await dir.close();
  }

  it("refuses a FIFO an earlier attempt left under the record's name instead of waiting for a reader", async () => {
    const c = context();
    await launched(c, 1);
    execFileSync('mkfifo', [join(c.root, 'runs', 'u1', '.kruntimes-launched-2')]);
    const dir = await openDirBeneath(c.root, c.runDirSegments);
    assert.ok(dir);
    await assert.rejects(markLaunched(dir, 2), { code: 'ENXIO' });
    await dir.close();
  });

  it('launches a Run created after this runtimed started, without looking further', async () => {
    const c = context();
    await launched(c, 1);
    assert.equal(await resumeRun(c, run('2026-12-02T05:00:02Z')), 'launch');
  });

  it('resumes a Run this runtimed dropped after an error as after a restart, however new the Run', async () => {
    const newer = run('2026-12-02T05:00:02Z');
    assert.equal(await resumeRun({ ...context(true), retaken: true }, newer), 'adopt');
    const c = { ...context(), retaken: true };
    assert.equal(await resumeRun(c, newer), 'launch', 'never launched');
    await launched(c, 1);
    assert.equal(await resumeRun(c, newer), 'lost', 'launched, and the execution is gone: not run twice');
  });

  it('adopts the execution the Runtime Server still has', async () => {
    assert.equal(await resumeRun(context(true), run(older)), 'adopt');
  });

  it('takes a launched attempt without an execution as lost; another attempt or no record is launched', async () => {
    const c = context();
    assert.equal(await resumeRun(c, run(older)), 'launch', 'no Run directory yet');
    await launched(c, 1);
    assert.equal(await resumeRun(c, run(older)), 'lost');
    assert.equal(await resumeRun(c, run(older, 2)), 'launch', 'the record is per attempt');
  });

  it('leaves a Run directory the Run replaced by a link to the launch (UnsafePath), not lost', async () => {
    const c = context();
    await launched(c, 1);
    const elsewhere = join(c.root, 'elsewhere');
    renameSync(join(c.root, 'runs', 'u1'), elsewhere);
    mkdirSync(join(c.root, 'runs'), { recursive: true });
    symlinkSync(elsewhere, join(c.root, 'runs', 'u1'));
    assert.equal(await resumeRun(c, run(older)), 'launch');
  });
});
