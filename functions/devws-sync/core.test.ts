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
    const d = decideSync(project({ lifecycle: 'provisioning', bindingId: 'b-1' }), true, now);
    assert.equal(d.kind, 'ops');
    assert.deepEqual(d.kind === 'ops' && statusOf(d.ops)?.sync, {
      state: 'running',
      operationId: 'p1-sync-1',
      requestsSeen: 0,
    });
    assert.equal(d.kind === 'ops' && d.ops.length, 1, 'the first sync has no Event of its own (its outcome has)');
    const call = decideSync(
      project({ lifecycle: 'provisioning', bindingId: 'b-1', sync: { state: 'running' } }),
      true,
      now,
    );
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
      assert.deepEqual(decideSync(project(s), git, now), { kind: 'ops', ops: [] }, JSON.stringify(s));
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

  it('re-sync: a bumped spec.syncRequests starts the next sync once the last one ended, answering the bump; the snapshot before it stays until the new one lands', () => {
    const ref = `refs/ora/upstreams/b-1/snapshots/${COMMIT}`;
    const synced = (syncRequests: number | undefined, sync: NonNullable<Project['status']>['sync']): Project => ({
      ...project({ lifecycle: 'active', bindingId: 'b-1', snapshot: { ref, commit: COMMIT }, sync }),
      spec: { ...project(undefined).spec, ...(syncRequests === undefined ? {} : { syncRequests }) },
    });
    const first = { state: 'succeeded' as const, operationId: 'p1-sync-1', requestsSeen: 0 };
    assert.deepEqual(decideSync(synced(0, first), true, now), { kind: 'ops', ops: [] }, 'nothing asked');
    const d = decideSync(synced(1, first), true, now);
    assert.ok(d.kind === 'ops');
    const st = statusOf(d.ops);
    assert.deepEqual(st?.sync, { state: 'running', operationId: 'p1-sync-2', requestsSeen: 1 });
    assert.deepEqual(st?.snapshot, { ref, commit: COMMIT }, 'the current snapshot stays while the re-sync runs');
    const event = d.ops.find((o) => o.op === 'create')?.object as { reason?: string; message?: string };
    assert.equal(event.reason, 'RepositorySyncStarted');
    assert.match(event.message ?? '', /^p1-sync-2: sync main again \(syncRequests 1\)$/);
    // Bumped again while it runs: the running sync is asked for; the next one starts after it.
    const running = synced(3, { state: 'running', operationId: 'p1-sync-2', requestsSeen: 1 });
    assert.equal(decideSync(running, true, now).kind, 'call');
    const newer = 'b'.repeat(40);
    const done = statusOf(afterSync(running, { kind: 'synced', result: { ref: `r/${newer}`, commit: newer } }, now));
    assert.deepEqual(done?.sync, { state: 'succeeded', operationId: 'p1-sync-2', requestsSeen: 1 });
    assert.equal(done?.snapshot?.commit, newer);
    const next = decideSync({ ...running, status: done }, true, now);
    assert.deepEqual(next.kind === 'ops' && statusOf(next.ops)?.sync, {
      state: 'running',
      operationId: 'p1-sync-3',
      requestsSeen: 3,
    });
    // A failed sync (the first or a re-sync) is tried again only when asked; a failed re-sync keeps the snapshot.
    const failed = afterSync(running, { kind: 'failed', message: 'gone' }, now);
    assert.deepEqual(statusOf(failed)?.snapshot, { ref, commit: COMMIT });
    const unsynced = (syncRequests: number): Project => ({
      ...project({ lifecycle: 'active', bindingId: 'b-1', sync: { state: 'failed', operationId: 'p1-sync-1' } }),
      spec: { ...project(undefined).spec, syncRequests },
    });
    assert.deepEqual(decideSync(unsynced(0), true, now), { kind: 'ops', ops: [] });
    const again = decideSync(unsynced(1), true, now);
    assert.equal(again.kind === 'ops' && statusOf(again.ops)?.sync?.operationId, 'p1-sync-2');
    assert.deepEqual(
      decideSync({ ...unsynced(1), status: { ...unsynced(1).status, lifecycle: 'deleting' } }, true, now),
      {
        kind: 'ops',
        ops: [],
      },
      'never while the Project is deleted',
    );
  });

  it('reads the Git Server answer: 200 with a snapshot, 400/422 failed, 401/5xx/garbage unanswered', () => {
    assert.equal(outcomeOf(200, JSON.stringify({ ref: 'r', commit: COMMIT })).kind, 'synced');
    assert.equal(outcomeOf(422, JSON.stringify({ reason: 'repository_sync_failed' })).kind, 'failed');
    assert.equal(outcomeOf(400, '{}').kind, 'failed');
    assert.equal(outcomeOf(401, '{}').kind, 'unanswered');
    assert.equal(outcomeOf(503, 'no').kind, 'unanswered');
    assert.equal(outcomeOf(200, 'garbage').kind, 'unanswered');
  });

  it('names the Git Server reason once when its message already starts with it', () => {
    const said = (body: object): string => {
      const o = outcomeOf(422, JSON.stringify(body));
      return o.kind === 'failed' ? o.message : o.kind;
    };
    assert.equal(
      said({ reason: 'ssh_unavailable', message: 'ssh_unavailable: ssh cannot run as uid 65532' }),
      'Git Server answered 422: ssh_unavailable: ssh cannot run as uid 65532',
    );
    assert.equal(
      said({ reason: 'repository_sync_failed', message: 'x.invalid does not resolve' }),
      'Git Server answered 422: repository_sync_failed x.invalid does not resolve',
    );
    assert.equal(said({}), 'Git Server answered 422:');
  });

  it('a deleted Project (gone, or recorded deleted) has its repository removed; a live one never', () => {
    assert.deepEqual(removalOf('team/p1', undefined), { namespace: 'team', project: 'p1' });
    assert.deepEqual(removalOf('team/p1', project({ lifecycle: 'deleted' })), { namespace: 'team', project: 'p1' });
    assert.equal(removalOf('team/p1', project({ lifecycle: 'deleting', bindingId: 'b-1' })), undefined);
    assert.equal(removalOf('team/p1', project({ lifecycle: 'active', bindingId: 'b-1' })), undefined);
  });
});
