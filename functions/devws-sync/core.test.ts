/** devws-sync's decisions: one sync per Project without a snapshot, recorded as running first; the answer recorded with the snapshot. */
import assert from 'node:assert/strict';
import type { Project } from '../../lib/devws/api.ts';
import type { Operation as FnOp } from '../../lib/fn/types.ts';
import { afterSync, decideSync, removalOf } from './core.ts';
import { outcomeOf } from './index.ts';

const COMMIT = 'a'.repeat(40);
const now = new Date('2026-12-01T12:00:00Z');
const project = (status: Project['status']): Project => ({
  metadata: { name: 'p1', namespace: 'team', uid: 'b-1' },
  spec: { repository: { url: 'https://git.example/o/r.git', defaultBranch: 'main' } },
  status,
});
const statusOf = (ops: FnOp[]): Project['status'] => {
  const w = ops.find((o) => o.op === 'status');
  return w?.op === 'status' ? (w.object as Project).status : undefined;
};

describe('devws-sync (pure decisions)', () => {
  it('records a new sync as running before any call; then calls the Git Server for it', () => {
    const d = decideSync(project({ lifecycle: 'provisioning', bindingId: 'b-1' }), true);
    assert.equal(d.kind, 'ops');
    assert.deepEqual(d.kind === 'ops' && statusOf(d.ops)?.sync, { state: 'running', operationId: 'p1-sync-1' });
    const call = decideSync(project({ lifecycle: 'provisioning', bindingId: 'b-1', sync: { state: 'running' } }), true);
    assert.deepEqual(call.kind === 'call' && call.request, {
      namespace: 'team',
      project: 'p1',
      bindingId: 'b-1',
      url: 'https://git.example/o/r.git',
      branch: 'main',
    });
  });

  it('does nothing without a Git Server, before the Project is initialised, while it is deleted, or once synced or failed', () => {
    const none = (s: Project['status'], git = true): void =>
      assert.deepEqual(decideSync(project(s), git), { kind: 'ops', ops: [] }, JSON.stringify(s));
    none({ lifecycle: 'active', bindingId: 'b-1' }, false);
    none(undefined);
    none({ lifecycle: 'deleting', bindingId: 'b-1', sync: { state: 'running' } });
    none({
      lifecycle: 'active',
      bindingId: 'b-1',
      sync: { state: 'succeeded' },
      snapshot: { ref: 'r', commit: COMMIT },
    });
    none({ lifecycle: 'active', bindingId: 'b-1', sync: { state: 'failed' } });
  });

  it('records the snapshot and succeeded together; a refusal fails the sync; no answer is asked again, never read as failed', () => {
    const p = project({
      lifecycle: 'provisioning',
      bindingId: 'b-1',
      sync: { state: 'running', operationId: 'p1-sync-1' },
    });
    const ref = `refs/ora/upstreams/b-1/snapshots/${COMMIT}`;
    const ok = afterSync(p, { kind: 'synced', result: { ref, commit: COMMIT } }, now);
    assert.deepEqual(statusOf(ok)?.snapshot, { ref, commit: COMMIT });
    assert.deepEqual(statusOf(ok)?.sync, { state: 'succeeded', operationId: 'p1-sync-1' });
    const failed = afterSync(p, { kind: 'failed', message: 'x' }, now);
    assert.deepEqual(statusOf(failed)?.sync, { state: 'failed', operationId: 'p1-sync-1' });
    assert.equal(statusOf(failed)?.snapshot, undefined);
    assert.deepEqual(afterSync(p, { kind: 'unanswered', message: 'reset' }, now), [{ op: 'requeue', afterMs: 5000 }]);
  });

  it('reads the Git Server answer: 200 with a snapshot, 400/422 failed, 401/5xx/garbage unanswered', () => {
    assert.equal(outcomeOf(200, JSON.stringify({ ref: 'r', commit: COMMIT })).kind, 'synced');
    assert.equal(outcomeOf(422, JSON.stringify({ reason: 'repository_sync_failed' })).kind, 'failed');
    assert.equal(outcomeOf(400, '{}').kind, 'failed');
    assert.equal(outcomeOf(401, '{}').kind, 'unanswered');
    assert.equal(outcomeOf(503, 'no').kind, 'unanswered');
    assert.equal(outcomeOf(200, 'garbage').kind, 'unanswered');
  });

  it('a deleted Project (gone, or recorded deleted) has its repository removed; a live one never', () => {
    assert.deepEqual(removalOf('team/p1', undefined), { namespace: 'team', project: 'p1' });
    assert.deepEqual(removalOf('team/p1', project({ lifecycle: 'deleted' })), { namespace: 'team', project: 'p1' });
    assert.equal(removalOf('team/p1', project({ lifecycle: 'deleting', bindingId: 'b-1' })), undefined);
    assert.equal(removalOf('team/p1', project({ lifecycle: 'active', bindingId: 'b-1' })), undefined);
  });
});
