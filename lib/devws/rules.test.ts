/**
 * One test per rule of seed 002 (developer workspaces), named after the rule. docs/workspaces-dev.md
 * maps every rule to its test.
 */
import assert from 'node:assert/strict';
import type { Operation, OperationStatus, Project, Workspace, WorkspaceStatus } from './api.ts';
import { DevwsError } from './api.ts';
import { applyCloneResult, assertDispatchInput, freezeCloneInput, mayDispatchClone } from './clone.ts';
import {
  assertReconciled,
  effectId,
  effectsToReconcile,
  planEffect,
  reconcileAbsent,
  recordEffect,
} from './effects.ts';
import {
  assertCurrentNode,
  nextGeneration,
  nodeDisconnected,
  nodeIsLive,
  nodeReconnected,
  registerNode,
} from './fencing.ts';
import { beginQuiesce, decideQuiesce } from './idle.ts';
import { assertRequestAllowed, commitReady, projectAfter } from './lifecycle.ts';
import { cloneMessage, CLONE_MESSAGE_MAX, parseNodeReport } from './node-report.ts';
import {
  advance,
  assertNoOperationInProgress,
  claim,
  explicitRetry,
  initialStatus,
  oldestUnfinished,
  STEPS,
  stepsFor,
} from './operations.ts';
import {
  assertPluginRequest,
  freezePlugins,
  hasPluginWork,
  pluginInstancesAfter,
  pluginsDone,
  recordPluginResults,
} from './plugins.ts';
import {
  resolveBaseRef,
  validateDefaultBranch,
  validateRefName,
  validateRepositoryUrl,
  workspaceBranch,
} from './validate.ts';

const NOW = new Date('2026-12-01T12:00:00Z');
const later = (ms: number): Date => new Date(NOW.getTime() + ms);
const C1 = 'a'.repeat(40);
const C2 = 'b'.repeat(40);

function reason(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof DevwsError) return e.reason;
    throw e;
  }
  return 'no error';
}

function project(status: Project['status'] = {}): Project {
  return {
    metadata: { name: 'p1', namespace: 'team' },
    spec: { repository: { url: 'https://git.example/x.git', defaultBranch: 'main' } },
    status,
  };
}

function op(name: string, state: OperationStatus['state'], created = '2026-12-01T11:00:00Z'): Operation {
  return {
    metadata: { name, creationTimestamp: created },
    spec: { project: 'p1', workspace: 'w', kind: 'stop' },
    status: { state },
  };
}

/** A Workspace with a live sandbox of generation 1 and a live Node. */
function liveWs(over: Partial<WorkspaceStatus> = {}): WorkspaceStatus {
  return {
    observedState: 'ready',
    admissionOpen: true,
    admissionEpoch: 3,
    runtimeGeneration: 1,
    baseCommitId: C1,
    sandbox: { id: 'sbx-1', generation: 1, nodeId: 'node-1' },
    node: {
      nodeId: 'node-1',
      incarnation: 'i1',
      sandboxId: 'sbx-1',
      generation: 1,
      initialized: true,
      connected: true,
      heartbeatAt: NOW.toISOString(),
    },
    ...over,
  };
}

function cloning(): OperationStatus {
  const s = { ...initialStatus('create_workspace', false), state: 'running' as const, step: 'clone' as const };
  return freezeCloneInput(
    s,
    project({ snapshot: { ref: `refs/ora/upstreams/b1/snapshots/${C1}`, commit: C1 } }),
    'refs/heads/workspaces/w/main',
    'https://git.local',
    NOW,
  ).status;
}

describe('seed 002 rules (lib/devws)', () => {
  describe('Project', () => {
    it('repository_url_https_or_ssh_only', () => {
      validateRepositoryUrl('https://github.com/o/r.git');
      validateRepositoryUrl('ssh://git@github.com/o/r.git');
      validateRepositoryUrl('git@github.com:o/r.git');
      assert.equal(
        reason(() => validateRepositoryUrl('http://github.com/o/r.git')),
        'invalid_repository_url',
      );
      assert.equal(
        reason(() => validateRepositoryUrl('file:///tmp/r')),
        'invalid_repository_url',
      );
      assert.equal(
        reason(() => validateRepositoryUrl('git://github.com/o/r')),
        'invalid_repository_url',
      );
    });
    it('repository_url_no_query_fragment_or_password', () => {
      assert.equal(
        reason(() => validateRepositoryUrl('https://h/o/r.git?x=1')),
        'invalid_repository_url',
      );
      assert.equal(
        reason(() => validateRepositoryUrl('https://h/o/r.git#frag')),
        'invalid_repository_url',
      );
      assert.equal(
        reason(() => validateRepositoryUrl('https://u:secret@h/o/r.git')),
        'invalid_repository_url',
      );
      validateRepositoryUrl('https://user@h/o/r.git');
    });
    it('default_branch_required (HEAD or empty)', () => {
      assert.equal(
        reason(() => validateDefaultBranch('HEAD')),
        'default_branch_required',
      );
      assert.equal(
        reason(() => validateDefaultBranch('')),
        'default_branch_required',
      );
      assert.equal(validateDefaultBranch('release/1.x'), 'release/1.x');
    });
    it('invalid_ref', () => {
      for (const bad of [
        'a..b',
        'a b',
        'x~1',
        'x^',
        'a:b',
        '-x',
        'x/',
        'x.lock',
        '.hidden',
        'a//b',
        'a@{1}',
        'refs/heads/main',
      ]) {
        assert.equal(
          reason(() => validateRefName(bad)),
          'invalid_ref',
          bad,
        );
      }
      assert.equal(
        reason(() => validateDefaultBranch('a..b')),
        'invalid_ref',
      );
    });
    it('project_active_after_create_operation_either_way', () => {
      assert.equal(projectAfter({ lifecycle: 'provisioning' }, 'create_project', 'failed').lifecycle, 'active');
      assert.equal(projectAfter({ lifecycle: 'provisioning' }, 'create_project', 'succeeded').lifecycle, 'active');
    });
    it('project_delete_refused_returns_to_active', () => {
      assert.equal(projectAfter({ lifecycle: 'deleting' }, 'delete_project', 'failed').lifecycle, 'active');
      assert.equal(projectAfter({ lifecycle: 'deleting' }, 'delete_project', 'succeeded').lifecycle, 'deleted');
    });
  });

  describe('Workspace', () => {
    it('base_ref_not_synced (isolated baseRef: empty, HEAD or the binding branch only)', () => {
      for (const ok of [undefined, '', 'HEAD', 'main']) assert.equal(resolveBaseRef(ok, 'main'), 'main');
      assert.equal(
        reason(() => resolveBaseRef('develop', 'main')),
        'base_ref_not_synced',
      );
    });
    it('workspace_branch_is_refs_heads_workspaces_id_ref', () => {
      assert.equal(workspaceBranch('w1', 'main'), 'refs/heads/workspaces/w1/main');
    });
    it('main_workspace_not_deletable_alone', () => {
      const ws = {
        metadata: { name: 'w' },
        spec: { project: 'p1', kind: 'main' as const, desiredState: 'running' as const },
      };
      assert.equal(
        reason(() => assertRequestAllowed('delete_workspace', ws)),
        'main_workspace_not_deletable',
      );
      assertRequestAllowed('delete_workspace', { ...ws, spec: { ...ws.spec, kind: 'isolated' } });
    });
    it('start_needs_initialised_stopped_workspace', () => {
      const ws = (status: WorkspaceStatus): Workspace => ({
        metadata: { name: 'w' },
        spec: { project: 'p1', kind: 'main' as const, desiredState: 'running' as const },
        status,
      });
      assert.equal(
        reason(() => assertRequestAllowed('start', ws({ observedState: 'stopped' }))),
        'workspace_not_startable',
      );
      assert.equal(
        reason(() => assertRequestAllowed('start', ws({ observedState: 'ready', baseCommitId: C1 }))),
        'workspace_not_startable',
      );
      assertRequestAllowed('start', ws({ observedState: 'stopped', baseCommitId: C1 }));
      assert.ok(!STEPS.start.includes('clone'), 'start never re-clones');
    });
  });

  describe('Operations', () => {
    it('step_lists_per_kind (the seed table)', () => {
      assert.deepEqual(STEPS.create_project, ['sandbox', 'node', 'clone', 'plugin', 'done']);
      assert.deepEqual(STEPS.create_workspace, ['sandbox', 'node', 'clone', 'plugin', 'done']);
      assert.deepEqual(STEPS.start, ['sandbox', 'node', 'plugin', 'done']);
      assert.deepEqual(STEPS.restart, ['quiesce', 'terminate', 'sandbox', 'node', 'plugin', 'done']);
      assert.deepEqual(STEPS.stop, ['quiesce', 'terminate', 'done']);
      assert.deepEqual(STEPS.delete_workspace, ['quiesce', 'terminate', 'cleanup', 'done']);
      assert.deepEqual(STEPS.delete_project, ['quiesce', 'terminate', 'cleanup', 'done']);
      assert.deepEqual(STEPS.install_plugin, ['plugin', 'done']);
      assert.deepEqual(STEPS.remove_plugin, ['plugin', 'done']);
    });
    it('plugin_step_skipped_when_nothing_to_do', () => {
      assert.deepEqual(stepsFor('start', false), ['sandbox', 'node', 'done']);
      assert.deepEqual(stepsFor('start', true), ['sandbox', 'node', 'plugin', 'done']);
    });
    it('operation_created_queued (202: returned at once)', () => {
      assert.equal(initialStatus('stop', false).state, 'queued');
      assert.equal(initialStatus('stop', false).step, 'quiesce');
    });
    it('operation_in_progress (at most one unfinished per Project)', () => {
      for (const st of ['queued', 'running', 'retry_wait', 'blocked'] as const) {
        assert.equal(
          reason(() => assertNoOperationInProgress('p1', [op('a', st)])),
          'operation_in_progress',
          st,
        );
      }
      assertNoOperationInProgress('p1', [op('a', 'succeeded'), op('b', 'failed')]);
      assertNoOperationInProgress('p2', [op('a', 'running')]);
    });
    it('operation_in_progress_race: only the oldest unfinished runs', () => {
      const first = op('b', 'queued', '2026-12-01T11:00:00Z');
      assert.equal(oldestUnfinished('p1', [op('a', 'queued', '2026-12-01T11:00:01Z'), first]), first);
    });
    it('retry_wait_claimable_after_retry_at', () => {
      const s: OperationStatus = { state: 'retry_wait', retryAt: later(10_000).toISOString(), step: 'clone' };
      assert.equal(claim(s, later(9_999)), undefined);
      assert.equal(claim(s, later(10_000))?.state, 'running');
      assert.equal(claim({ state: 'blocked' }, later(99_999)), undefined, 'blocked is never claimed by time');
    });
    it('explicit_retry_of_blocked_or_retry_wait_only', () => {
      assert.equal(explicitRetry({ state: 'blocked', step: 'clone', cloneUnknown: true }).state, 'queued');
      assert.equal(explicitRetry({ state: 'retry_wait', step: 'clone' }).state, 'queued');
      for (const st of ['queued', 'running', 'succeeded', 'failed'] as const) {
        assert.equal(
          reason(() => explicitRetry({ state: st })),
          'operation_not_retryable',
          st,
        );
      }
    });
    it('succeeded_after_last_step', () => {
      let s: OperationStatus = { ...initialStatus('stop', false), state: 'running' };
      s = advance(s);
      assert.equal(s.step, 'terminate');
      s = advance(s);
      assert.equal(s.state, 'succeeded');
      assert.equal(s.step, 'done');
    });
    it('ready_and_succeeded_together_after_last_node_check', () => {
      const o: Operation = { metadata: { name: 'op1' }, spec: { project: 'p1', workspace: 'w', kind: 'start' } };
      const ws = liveWs({ observedState: 'starting', admissionOpen: false });
      const ready = commitReady(ws, o, NOW);
      assert.equal(ready.observedState, 'ready');
      assert.equal(ready.admissionOpen, true);
      assert.deepEqual(ready.operation, { name: 'op1', state: 'succeeded', step: 'done' });
      assert.equal(
        reason(() => commitReady(ws, o, later(30_001))),
        'node_not_live',
      );
    });
  });

  describe('Steps', () => {
    it('node_step_requires_fresh_heartbeat_and_matching_node_id', () => {
      assert.ok(nodeIsLive(liveWs(), later(30_000)));
      assert.ok(!nodeIsLive(liveWs(), later(30_001)), 'heartbeat older than 30 s');
      assert.ok(
        !nodeIsLive(liveWs({ sandbox: { id: 'sbx-1', generation: 1, nodeId: 'other' } }), NOW),
        'nodeId differs from ensure result',
      );
      assert.ok(!nodeIsLive(liveWs({ runtimeGeneration: 2 }), NOW), 'Node of an older generation');
      const ws = liveWs();
      assert.ok(!nodeIsLive({ ...ws, node: { ...ws.node, initialized: false } }, NOW), 'not initialised');
    });
  });

  describe('Clone', () => {
    it('clone_input_frozen_once', () => {
      const s = cloning();
      assert.equal(s.cloneInput?.baseCommit, C1);
      assert.equal(s.cloneInput?.repositoryUrl, 'https://git.local/team/p1.git');
      const p2 = project({ snapshot: { ref: `refs/ora/upstreams/b1/snapshots/${C2}`, commit: C2 } });
      const again = freezeCloneInput(
        applyCloneResult(s, { kind: 'failed' }, NOW).status,
        p2,
        'x',
        'https://other',
        NOW,
      );
      assert.equal(again.status.cloneInput?.baseCommit, C1, 'a retry clones the same snapshot');
      assert.equal(
        reason(() => assertDispatchInput(s, { ...s.cloneInput!, baseCommit: C2 })),
        'clone_input_conflict',
      );
    });
    it('base_commit_mismatch (not recorded)', () => {
      const s = cloning();
      assert.equal(
        reason(() => applyCloneResult(s, { kind: 'succeeded', commit: C2 }, NOW)),
        'base_commit_mismatch',
      );
      const ok = applyCloneResult(s, { kind: 'succeeded', commit: C1 }, NOW);
      assert.equal(ok.baseCommitId, C1);
      assert.equal(ok.status.step, 'done', 'plugin skipped: clone was the last step');
      assert.equal(ok.status.state, 'running', 'success waits for the ready commit point');
    });
    it('snapshot_not_ready (retry_wait 10 s, no attempt consumed)', () => {
      const s = { ...initialStatus('create_workspace', false), state: 'running' as const, step: 'clone' as const };
      const r = freezeCloneInput(s, project({ sync: { state: 'running' } }), 'b', 'https://git.local', NOW).status;
      assert.equal(r.state, 'retry_wait');
      assert.equal(r.reason, 'snapshot_not_ready');
      assert.equal(r.retryAt, later(10_000).toISOString());
      assert.equal(r.cloneAttempts ?? 0, 0);
      assert.equal(r.cloneInput, undefined);
    });
    it('repository_sync_failed', () => {
      const s = { ...initialStatus('create_workspace', false), state: 'running' as const, step: 'clone' as const };
      const r = freezeCloneInput(
        s,
        project({ sync: { state: 'failed', operationId: 'sync-7' } }),
        'b',
        'https://git.local',
        NOW,
      ).status;
      assert.equal(r.state, 'failed');
      assert.equal(r.reason, 'repository_sync_failed');
    });
    it('git_server_unconfigured (blocked)', () => {
      const s = { ...initialStatus('create_workspace', false), state: 'running' as const, step: 'clone' as const };
      const r = freezeCloneInput(s, project({ snapshot: { ref: 'r', commit: C1 } }), 'b', undefined, NOW).status;
      assert.equal(r.state, 'blocked');
      assert.equal(r.reason, 'git_server_unconfigured');
    });
    it('clone_failed_retried_after_5s_and_10s_then_fails_unavailable', () => {
      const first = applyCloneResult(cloning(), { kind: 'failed' }, NOW);
      assert.equal(first.status.state, 'retry_wait');
      assert.equal(first.status.retryAt, later(5_000).toISOString());
      const second = applyCloneResult({ ...first.status, state: 'running' }, { kind: 'failed' }, NOW);
      assert.equal(second.status.retryAt, later(10_000).toISOString());
      const third = applyCloneResult({ ...second.status, state: 'running' }, { kind: 'failed' }, NOW);
      assert.equal(third.status.state, 'failed');
      assert.equal(third.status.reason, 'clone_failed');
      assert.equal(third.workspaceUnavailable, true);
    });
    it("clone_failed says why: the Node's message in the retry and in the failure", () => {
      const why = "git fetch: fatal: unable to access 'https://git.local/ns/p1.git/': error 403";
      const first = applyCloneResult(cloning(), { kind: 'failed', message: why }, NOW).status;
      assert.equal(first.message, `clone attempt 1 failed: ${why}`);
      let s = first;
      for (let i = 0; i < 2; i++)
        s = applyCloneResult({ ...s, state: 'running' }, { kind: 'failed', message: why }, NOW).status;
      assert.equal(s.state, 'failed');
      assert.equal(s.message, `clone failed 3 times: ${why}`);
    });
    it('a clone report message is one bounded line (parse refuses others)', () => {
      const doc = (message: string): string =>
        JSON.stringify({
          nodeId: 'n',
          incarnation: 'i',
          sandboxId: 's',
          generation: 1,
          heartbeatAt: NOW.toISOString(),
          clone: { operation: 'op', attempt: 0, result: 'failed', message },
        });
      assert.equal(parseNodeReport(doc('fatal: 403')).clone?.message, 'fatal: 403');
      for (const bad of ['two\nlines', 'x'.repeat(CLONE_MESSAGE_MAX + 1)]) {
        assert.throws(() => parseNodeReport(doc(bad)), /invalid_node_report|one line/);
      }
      assert.equal(cloneMessage('a\n\tb  '), 'a b');
      assert.equal(cloneMessage('y'.repeat(1000)).length, CLONE_MESSAGE_MAX);
    });
    it('clone_result_unknown_never_auto_retried', () => {
      const r = applyCloneResult(cloning(), { kind: 'unknown' }, NOW).status;
      assert.equal(r.state, 'blocked');
      assert.equal(r.reason, 'clone_result_unknown');
      assert.equal(claim(r, later(3_600_000)), undefined);
      assert.ok(!mayDispatchClone({ ...r, state: 'running' }), 'no second dispatch while unknown');
    });
    it('clone_late_definite_result_continues_same_operation', () => {
      const blocked = applyCloneResult(cloning(), { kind: 'unknown' }, NOW).status;
      const ok = applyCloneResult(blocked, { kind: 'succeeded', commit: C1 }, NOW);
      assert.equal(ok.status.state, 'queued', 'claimable again; admission waits for the controller');
      const withPlugin = {
        ...blocked,
        steps: ['sandbox', 'node', 'clone', 'plugin', 'done'] as OperationStatus['steps'],
      };
      assert.equal(
        applyCloneResult(withPlugin, { kind: 'succeeded', commit: C1 }, NOW).status.state,
        'queued',
        'claimable again',
      );
      const bad = applyCloneResult(blocked, { kind: 'failed' }, NOW);
      assert.equal(bad.status.cloneAttempts, 1, 'same attempt count');
      assert.equal(bad.status.retryAt, later(5_000).toISOString(), 'same backoff');
    });
  });

  describe('Idle proof', () => {
    it('stop_closes_admission_and_bumps_epoch_in_one_write', () => {
      const q = beginQuiesce(liveWs(), { ...initialStatus('stop', false), state: 'running' }, 0);
      assert.equal(q.workspace?.admissionOpen, false);
      assert.equal(q.workspace?.admissionEpoch, 4);
      assert.equal(q.operation.workspaceBefore, 'ready');
    });
    it('resource_in_use_when_executions_unfinished', () => {
      const q = beginQuiesce(liveWs(), { ...initialStatus('stop', false), state: 'running' }, 2);
      assert.equal(q.operation.state, 'failed');
      assert.equal(q.operation.reason, 'resource_in_use');
      assert.equal(q.workspace, undefined, 'nothing changes on the Workspace');
    });
    it('idle_proof_must_match_admission_epoch', () => {
      const o = { ...initialStatus('stop', false), state: 'running' as const, workspaceBefore: 'ready' as const };
      const ws = liveWs({ admissionOpen: false, admissionEpoch: 4, idleProof: { epoch: 3, idle: true } });
      assert.equal(decideQuiesce(ws, o, NOW).kind, 'wait');
      assert.equal(decideQuiesce({ ...ws, idleProof: { epoch: 4, idle: true } }, o, NOW).kind, 'advance');
    });
    it('resource_in_use_when_node_not_idle_restores_workspace', () => {
      const o = { ...initialStatus('stop', false), state: 'running' as const, workspaceBefore: 'ready' as const };
      const ws = liveWs({
        observedState: 'stopping',
        admissionOpen: false,
        admissionEpoch: 4,
        idleProof: { epoch: 4, idle: false },
      });
      const d = decideQuiesce(ws, o, NOW);
      assert.equal(d.kind, 'refused');
      if (d.kind !== 'refused') return;
      assert.equal(d.operation.reason, 'resource_in_use');
      assert.equal(d.workspace.observedState, 'ready');
      assert.equal(d.workspace.admissionOpen, true);
    });
    it('no_node_or_stale_heartbeat_never_advances_quiesce', () => {
      const o = { ...initialStatus('stop', false), state: 'running' as const };
      const ws = liveWs({ admissionEpoch: 4, idleProof: { epoch: 4, idle: true } });
      assert.equal(decideQuiesce(ws, o, later(30_001)).kind, 'wait');
      assert.equal(decideQuiesce({ ...ws, node: undefined }, o, NOW).kind, 'wait');
      assert.equal(
        decideQuiesce({ ...ws, sandbox: undefined, node: undefined }, o, NOW).kind,
        'advance',
        'no live sandbox: nothing to prove',
      );
    });
  });

  describe('Generations', () => {
    it('new_generation_only_after_old_sandbox_terminated', () => {
      assert.equal(
        reason(() => nextGeneration(liveWs())),
        'sandbox_not_terminated',
      );
      assert.equal(nextGeneration(liveWs({ sandbox: { id: 'sbx-1', generation: 1, terminated: true } })), 2);
    });
    it('stale_node', () => {
      const ws = liveWs({ runtimeGeneration: 2, sandbox: { id: 'sbx-2', generation: 2, nodeId: 'n2' } });
      assert.equal(
        reason(() => assertCurrentNode(ws, { generation: 1, sandboxId: 'sbx-1', nodeId: 'node-1' })),
        'stale_node',
      );
      assert.equal(
        reason(() => registerNode(ws, { generation: 1, sandboxId: 'sbx-1', nodeId: 'node-1', incarnation: 'x' }, NOW)),
        'stale_node',
      );
    });
    it('stale_sandbox', () => {
      const ws = liveWs();
      assert.equal(
        reason(() => assertCurrentNode(ws, { generation: 1, sandboxId: 'sbx-0', nodeId: 'node-1' })),
        'stale_sandbox',
      );
      const term = liveWs({ sandbox: { id: 'sbx-1', generation: 1, terminated: true } });
      assert.equal(
        reason(() => assertCurrentNode(term, { generation: 1, sandboxId: 'sbx-1', nodeId: 'node-1' })),
        'stale_sandbox',
      );
    });
    it('node_disconnect_closes_admission_and_same_node_reconnect_restores', () => {
      const down = nodeDisconnected(liveWs());
      assert.equal(down.observedState, 'unavailable');
      assert.equal(down.admissionOpen, false);
      assert.equal(down.admissionEpoch, 4);
      const other = nodeReconnected(
        down,
        { generation: 1, sandboxId: 'sbx-1', nodeId: 'node-1', incarnation: 'i2' },
        NOW,
      );
      assert.equal(other.observedState, 'unavailable', 'another incarnation does not restore');
      const back = nodeReconnected(
        down,
        { generation: 1, sandboxId: 'sbx-1', nodeId: 'node-1', incarnation: 'i1' },
        NOW,
      );
      assert.equal(back.observedState, 'ready');
      assert.equal(back.admissionOpen, true);
    });
  });

  describe('Effects', () => {
    const id = effectId('uid-1', 'sandbox_ensure', 'w', 1);
    const planned = planEffect(
      { state: 'running', step: 'sandbox' },
      { id, kind: 'sandbox_ensure', workspace: 'w', generation: 1 },
      5,
    );
    it('effect_id_is_idempotency_key', () => {
      assert.equal(effectId('uid-1', 'sandbox_ensure', 'w', 1), id);
      assert.notEqual(effectId('uid-1', 'sandbox_ensure', 'w', 2), id);
      assert.match(id, /^[a-z0-9-]{1,63}$/);
      assert.equal(planEffect(planned, { id, kind: 'sandbox_ensure' }, 5), planned, 'planning twice keeps one effect');
    });
    it('external_binding_conflict', () => {
      const s = recordEffect(planned, id, { externalId: id, outcome: 'succeeded', nodeId: 'n' }, 5);
      assert.equal(
        reason(() => recordEffect(s, id, { externalId: 'other', outcome: 'succeeded', nodeId: 'n' }, 5)),
        'external_binding_conflict',
      );
    });
    it('external_state_conflict', () => {
      const s = recordEffect(planned, id, { externalId: id, outcome: 'succeeded', nodeId: 'n' }, 5);
      assert.equal(
        reason(() => recordEffect(s, id, { externalId: id, outcome: 'succeeded', nodeId: 'm' }, 5)),
        'external_state_conflict',
      );
      assert.equal(
        reason(() => recordEffect(s, id, { externalId: id, outcome: 'failed' }, 5)),
        'external_state_conflict',
      );
      assert.deepEqual(
        recordEffect(s, id, { externalId: id, outcome: 'succeeded', nodeId: 'n' }, 5),
        s,
        'same result again: no-op',
      );
    });
    it('reconcile_required_after_lease_epoch_change', () => {
      assert.equal(
        reason(() => assertReconciled(planned, 6)),
        'reconcile_required',
      );
      assert.equal(
        reason(() => planEffect(planned, { id: 'x', kind: 'sandbox_terminate' }, 6)),
        'reconcile_required',
      );
      assert.deepEqual(
        effectsToReconcile(planned, 6).map((e) => e.id),
        [id],
      );
      const found = recordEffect(planned, id, { externalId: id, outcome: 'succeeded', nodeId: 'n' }, 6);
      assertReconciled(found, 6);
      assertReconciled(reconcileAbsent(planned, id, 6), 6);
    });
    it('timeout_never_read_as_not_executed', () => {
      const s = reconcileAbsent(planned, id, 5);
      assert.equal(s.effects?.[0]?.outcome, undefined, 'no outcome is invented');
      assert.equal(s.effects?.length, 1, 'the plan is kept');
    });
  });

  describe('Plugins (the plugin step)', () => {
    const M = '{"files":{}}';
    const pws = (st: Partial<WorkspaceStatus> = {}): Workspace => ({
      metadata: { name: 'w', namespace: 'team' },
      spec: { project: 'p1', kind: 'main', desiredState: 'running' },
      status: { observedState: 'ready', runtimeGeneration: 2, ...st },
    });
    const pop = (kind: Operation['spec']['kind'], plugin?: Operation['spec']['plugin']): Operation => ({
      metadata: { name: `o-${kind}`, uid: `uid-${kind}` },
      spec: { project: 'p1', workspace: 'w', kind, ...(plugin ? { plugin } : {}) },
    });
    const installed = { plugins: [{ name: 'lint', manifest: M, state: 'installed' as const }] };

    it('plugin_step_has_work: install/remove always; start/restart only with installed plugins; create never', () => {
      assert.equal(hasPluginWork('install_plugin', pop('install_plugin', { name: 'a', manifest: M }), pws()), true);
      assert.equal(hasPluginWork('remove_plugin', pop('remove_plugin', { name: 'a' }), pws()), true);
      assert.equal(hasPluginWork('start', pop('start'), pws()), false);
      assert.equal(hasPluginWork('start', pop('start'), pws(installed)), true);
      assert.equal(hasPluginWork('restart', pop('restart'), pws(installed)), true);
      const failedOnly = { plugins: [{ name: 'x', state: 'failed' as const }] };
      assert.equal(hasPluginWork('start', pop('start'), pws(failedOnly)), false, 'a failed instance is not re-run');
      assert.equal(hasPluginWork('create_workspace', pop('create_workspace'), pws(installed)), false);
      assert.equal(hasPluginWork('stop', pop('stop'), pws(installed)), false);
    });
    it('plugin_set_frozen_once (one execution ID per item, per generation)', () => {
      const o = pop('install_plugin', { name: 'lint', manifest: M });
      const s = freezePlugins({ state: 'running', step: 'plugin' }, o, pws());
      assert.equal(s.plugins?.length, 1);
      assert.deepEqual(
        { ...s.plugins?.[0], id: undefined },
        { id: undefined, name: 'lint', action: 'install', manifest: M },
      );
      assert.equal(freezePlugins(s, o, pws({ runtimeGeneration: 3 })), s, 'an existing set is kept as it is');
      const again = freezePlugins({ state: 'running' }, o, pws());
      assert.equal(again.plugins?.[0]?.id, s.plugins?.[0]?.id, 'stable across controller restarts');
      const other = freezePlugins({ state: 'running' }, o, pws({ runtimeGeneration: 3 }));
      assert.notEqual(other.plugins?.[0]?.id, s.plugins?.[0]?.id, 'another generation is another execution');
      const rm = freezePlugins({}, pop('remove_plugin', { name: 'lint' }), pws(installed));
      assert.deepEqual(
        rm.plugins?.map((i) => [i.name, i.action, i.manifest]),
        [['lint', 'remove', undefined]],
      );
    });
    it('plugin_advances_when_every_frozen_item_has_a_result', () => {
      const st = freezePlugins(
        {},
        pop('start'),
        pws({ plugins: [...installed.plugins, { name: 'fmt', state: 'installed' }] }),
      );
      const [a, b] = st.plugins ?? [];
      assert.ok(a && b);
      const half = recordPluginResults(st, [{ id: a.id, result: 'installed' }]);
      assert.equal(pluginsDone(half), false);
      const all = recordPluginResults(half, [{ id: b.id, result: 'failed', message: 'disk full' }]);
      assert.equal(pluginsDone(all), true);
      assert.equal(recordPluginResults(all, [{ id: 'ws-plg-other', result: 'installed' }]), all, 'not of the set');
      assert.equal(
        recordPluginResults(st, [{ id: a.id, result: 'removed' }]),
        st,
        'a result that does not fit the action is ignored',
      );
    });
    it('plugin_result_immutable (plugin_result_conflict)', () => {
      const st = freezePlugins({}, pop('install_plugin', { name: 'lint', manifest: M }), pws());
      const id = st.plugins?.[0]?.id ?? '';
      const done = recordPluginResults(st, [{ id, result: 'installed' }]);
      assert.equal(recordPluginResults(done, [{ id, result: 'installed' }]), done, 'the same result again: unchanged');
      assert.equal(
        reason(() => recordPluginResults(done, [{ id, result: 'failed' }])),
        'plugin_result_conflict',
      );
    });
    it('plugin_failure_recorded_on_instance_not_blocking_ready', () => {
      const st = freezePlugins({}, pop('install_plugin', { name: 'bad', manifest: 'x' }), pws(installed));
      const id = st.plugins?.[0]?.id ?? '';
      const s2 = recordPluginResults(st, [{ id, result: 'failed', message: 'invalid_plugin_manifest' }]);
      assert.deepEqual(pluginInstancesAfter(pws(installed).status ?? {}, s2, 'op1'), [
        { name: 'lint', manifest: M, state: 'installed' },
        { name: 'bad', manifest: 'x', state: 'failed', message: 'invalid_plugin_manifest', operation: 'op1' },
      ]);
      const afterOp = advance({ ...s2, steps: ['plugin', 'done'], step: 'plugin' });
      assert.equal(afterOp.state, 'succeeded', 'a failed item does not fail the operation');
      const rm = freezePlugins({}, pop('remove_plugin', { name: 'lint' }), pws(installed));
      const rmId = rm.plugins?.[0]?.id ?? '';
      const removed = recordPluginResults(rm, [{ id: rmId, result: 'removed' }]);
      assert.deepEqual(pluginInstancesAfter(pws(installed).status ?? {}, removed, 'op2'), []);
      const rmFailed = recordPluginResults(rm, [{ id: rmId, result: 'failed' }]);
      assert.deepEqual(pluginInstancesAfter(pws(installed).status ?? {}, rmFailed, 'op2'), installed.plugins);
    });
    it('plugin_request_fits_workspace (workspace_not_ready, plugin_not_installed, too_many_plugins)', () => {
      const inst = pop('install_plugin', { name: 'lint', manifest: M });
      assert.equal(
        reason(() => assertPluginRequest(inst, pws({ observedState: 'stopped' }))),
        'workspace_not_ready',
      );
      assert.equal(
        reason(() => assertPluginRequest(pop('remove_plugin', { name: 'x' }), pws())),
        'plugin_not_installed',
      );
      assertPluginRequest(pop('remove_plugin', { name: 'lint' }), pws(installed));
      const full = Array.from({ length: 16 }, (_, i) => ({ name: `p${i}`, state: 'installed' as const }));
      assert.equal(
        reason(() => assertPluginRequest(inst, pws({ plugins: full }))),
        'too_many_plugins',
      );
      assertPluginRequest(pop('install_plugin', { name: 'p3', manifest: M }), pws({ plugins: full }));
      assertPluginRequest(inst, pws());
    });
  });
});
