import assert from 'node:assert/strict';
import {
  fenceRejection,
  lookupWorkspace,
  workspaceAllows,
  workspacePodUnavailable,
  workspaceState,
} from './workspace.ts';
import { pod, run, workspaces, ws } from './testing.ts';

const r = run('r', { workspace: { name: 'w' } });

describe('run-scheduler workspace fencing', () => {
  it('places Runs without a workspace anywhere', () => {
    assert.deepEqual(workspaceState(run('plain'), 'bash', workspaces()), { ok: true });
  });

  it('waits with an explicit reason for every non-placeable workspace state', () => {
    const state = (...v: Parameters<typeof ws>): ReturnType<typeof workspaceState> =>
      workspaceState(r, 'bash', workspaces(ws(...v)));
    assert.deepEqual(workspaceState(r, 'bash', workspaces()), {
      ok: false,
      reason: 'WorkspaceNotFound',
      message: 'waiting for PersistentWorkspace "w": not found',
    });
    assert.deepEqual(state('w', { runtime: 'python', phase: 'Bound', boundPod: 'p', boundPodUID: 'u' }), {
      ok: false,
      reason: 'WorkspaceRuntimeMismatch',
      message: 'waiting for PersistentWorkspace "w": it belongs to runtime "python", not runtime "bash"',
    });
    assert.deepEqual(state('w', { phase: 'Pending' }), {
      ok: false,
      reason: 'WorkspacePending',
      message: 'waiting for PersistentWorkspace "w" to be bound',
    });
    assert.deepEqual(
      state('w'),
      { ok: false, reason: 'WorkspacePending', message: 'waiting for PersistentWorkspace "w" to be bound' },
      'no phase = Pending',
    );
    assert.deepEqual(
      state('w', { phase: 'Bound' }),
      { ok: false, reason: 'WorkspacePending', message: 'waiting for PersistentWorkspace "w" to be bound' },
      'Bound without a Pod',
    );
    assert.deepEqual(state('w', { phase: 'Lost', boundPod: 'p', boundPodUID: 'u' }), {
      ok: false,
      reason: 'WorkspaceLost',
      message: 'waiting for PersistentWorkspace "w": it is Lost (its bound runtime pod is gone) and is never rebound',
    });
    assert.deepEqual(state('w', { phase: 'Released', boundPod: 'p', boundPodUID: 'u' }), {
      ok: false,
      reason: 'WorkspaceReleased',
      message: 'waiting for PersistentWorkspace "w": it is Released and cannot be claimed by new Runs',
    });
    assert.deepEqual(state('w', { phase: 'Bound', boundPod: 'p', boundPodUID: 'u', deleting: true }), {
      ok: false,
      reason: 'WorkspaceDeleting',
      message: 'waiting for PersistentWorkspace "w": it is being deleted and cannot be claimed by new Runs',
    });
    assert.equal(
      workspaceAllows(
        r,
        pod('p', { uid: 'u' }),
        'bash',
        workspaces(ws('w', { phase: 'Bound', boundPod: 'p', boundPodUID: 'u', deleting: true })),
      ),
      false,
      'a Bound workspace with a deletionTimestamp admits no Pod',
    );
    assert.equal(
      state('w', { phase: 'Lost', boundPod: 'p', boundPodUID: 'u', deleting: true }).ok === false &&
        (state('w', { phase: 'Lost', boundPod: 'p', boundPodUID: 'u', deleting: true }) as { reason: string }).reason,
      'WorkspaceLost',
    );
    assert.deepEqual(state('w', { phase: 'Bound', boundPod: 'p' }), {
      ok: false,
      reason: 'WorkspacePodUIDMismatch',
      message: 'waiting for PersistentWorkspace "w": it is bound to runtime pod "p" without status.boundPodUID',
    });
  });

  it('fences a Bound workspace to its Pod name and UID', () => {
    const map = workspaces(ws('w', { phase: 'Bound', boundPod: 'p1', boundPodUID: 'uid-p1' }));
    assert.deepEqual(workspaceState(r, 'bash', map), { ok: true, fence: { workspace: 'w', pod: 'p1', uid: 'uid-p1' } });
    assert.equal(workspaceAllows(r, pod('p1'), 'bash', map), true);
    assert.equal(workspaceAllows(r, pod('p2'), 'bash', map), false);
    assert.equal(workspaceAllows(r, pod('p1', { uid: 'new' }), 'bash', map), false);
    assert.equal(workspaceAllows(r, pod('p1'), 'python', map), false);
  });

  it('explains why the fenced Pod cannot be used', () => {
    const fence = { workspace: 'w', pod: 'p1', uid: 'uid-p1' };
    assert.equal(fenceRejection(fence, [pod('p1'), pod('p2')]), undefined);
    assert.deepEqual(fenceRejection(fence, [pod('p2')]), {
      reason: 'WorkspacePodUnavailable',
      message: 'waiting for PersistentWorkspace "w": bound runtime pod "p1" not found',
    });
    assert.deepEqual(fenceRejection(fence, [pod('p1', { uid: 'u2' })]), {
      reason: 'WorkspacePodUIDMismatch',
      message:
        'waiting for PersistentWorkspace "w": runtime pod "p1" has UID "u2", but the workspace is bound to UID "uid-p1"',
    });
    assert.deepEqual(workspacePodUnavailable(fence), {
      reason: 'WorkspacePodUnavailable',
      message: 'waiting for bound runtime pod "p1" of PersistentWorkspace "w" to become available',
    });
  });

  it('looks workspaces up by namespace/name before name', () => {
    const map = new Map([
      ['w', ws('w', { runtime: 'a' })],
      ['ns/w', ws('w', { runtime: 'b' })],
    ]);
    assert.equal(lookupWorkspace(r, map)?.runtime, 'b');
    assert.equal(lookupWorkspace(run('o', { namespace: 'other', workspace: { name: 'w' } }), map)?.runtime, 'a');
    assert.equal(lookupWorkspace(run('none'), map), undefined);
  });
});
