import assert from 'node:assert/strict';
import type { Operation, Project, Workspace } from '../../lib/devws/api.ts';
import { reviewOperation, reviewProject, reviewRetry, reviewWorkspace, reviewWorkspaceUpdate } from './core.ts';

const project = (url: string, defaultBranch = 'main'): Project => ({
  metadata: { name: 'p1', namespace: 't' },
  spec: { repository: { url, defaultBranch } },
  status: { lifecycle: 'active' },
});
const ws = (kind: 'main' | 'isolated', baseRef?: string): Workspace => ({
  metadata: { name: 'w1' },
  spec: { project: 'p1', kind, desiredState: 'running', baseRef },
  status: { observedState: 'ready', baseCommitId: 'a'.repeat(40) },
});
const op = (name: string, kind: Operation['spec']['kind'], state?: 'running' | 'blocked' | 'succeeded'): Operation => ({
  metadata: { name },
  spec: { project: 'p1', workspace: 'w1', kind },
  status: state ? { state } : undefined,
});

describe('devws-admission review', () => {
  it('denies a Project with an http URL as 400 invalid_repository_url', () => {
    const r = reviewProject(project('http://h/o/r.git'));
    assert.equal(r.allowed, false);
    assert.equal(r.code, 400);
    assert.match(r.message ?? '', /^invalid_repository_url:/);
  });
  it('denies default branch HEAD as default_branch_required', () => {
    assert.match(reviewProject(project('https://h/o/r.git', 'HEAD')).message ?? '', /^default_branch_required:/);
    assert.equal(reviewProject(project('https://h/o/r.git')).allowed, true);
  });
  it('denies an isolated Workspace with another baseRef (base_ref_not_synced)', () => {
    assert.match(
      reviewWorkspace(ws('isolated', 'dev'), project('https://h/o/r.git'), []).message ?? '',
      /^base_ref_not_synced:/,
    );
    assert.equal(reviewWorkspace(ws('isolated', 'HEAD'), project('https://h/o/r.git'), []).allowed, true);
  });
  it('denies an Operation while another is unfinished (409 operation_in_progress)', () => {
    const r = reviewOperation(op('b', 'restart'), ws('main'), [op('a', 'stop', 'running'), op('b', 'restart')]);
    assert.equal(r.code, 409);
    assert.match(r.message ?? '', /^operation_in_progress:/);
    assert.equal(reviewOperation(op('b', 'stop'), ws('main'), [op('a', 'stop', 'succeeded')]).allowed, true);
  });
  it('denies deleting the main Workspace alone', () => {
    assert.match(
      reviewOperation(op('b', 'delete_workspace'), ws('main'), []).message ?? '',
      /^main_workspace_not_deletable:/,
    );
  });
  it('allows an explicit retry only of a blocked operation', () => {
    const old = op('a', 'stop', 'running');
    const bumped = { ...old, spec: { ...old.spec, retryRequests: 1 } };
    assert.match(reviewRetry(bumped, old).message ?? '', /^operation_not_retryable:/);
    assert.equal(reviewRetry(bumped, op('a', 'stop', 'blocked')).allowed, true);
  });
  it('install_plugin/remove_plugin need a ready Workspace and remove needs the plugin (409 workspace_not_ready, plugin_not_installed)', () => {
    const inst = {
      ...op('i', 'install_plugin'),
      spec: { ...op('i', 'install_plugin').spec, plugin: { name: 'lint', manifest: '{}' } },
    };
    const stopped = { ...ws('main'), status: { observedState: 'stopped' as const, baseCommitId: 'a'.repeat(40) } };
    const r = reviewOperation(inst, stopped, []);
    assert.equal(r.code, 409);
    assert.match(r.message ?? '', /^workspace_not_ready:/);
    assert.equal(reviewOperation(inst, ws('main'), []).allowed, true);
    const rm = { ...op('r', 'remove_plugin'), spec: { ...op('r', 'remove_plugin').spec, plugin: { name: 'lint' } } };
    assert.match(reviewOperation(rm, ws('main'), []).message ?? '', /^plugin_not_installed:/);
    const withLint = {
      ...ws('main'),
      status: { ...ws('main').status, plugins: [{ name: 'lint', state: 'installed' as const }] },
    };
    assert.equal(reviewOperation(rm, withLint, []).allowed, true);
  });
});

describe('devws-admission: the Node report (node-report annotation)', () => {
  const NODE = 'system:serviceaccount:t:kruntimes-devws-node';
  const pod = (name: string): { username: string; extra: Record<string, string[]> } => ({
    username: NODE,
    extra: { 'authentication.kubernetes.io/pod-name': [name] },
  });
  const live: Workspace = {
    metadata: { name: 'w1', namespace: 't', annotations: { keep: 'x' } },
    spec: { project: 'p1', kind: 'main', desiredState: 'running' },
    status: {
      observedState: 'stopping',
      runtimeGeneration: 2,
      admissionEpoch: 4,
      sandbox: { id: 'sbx-2', generation: 2, nodeId: 'sbx-2-node' },
      operation: { name: 'create' },
    },
  };
  const report = (r: Record<string, unknown>): string =>
    JSON.stringify({
      nodeId: 'sbx-2-node',
      incarnation: 'i1',
      sandboxId: 'sbx-2',
      generation: 2,
      heartbeatAt: '2026-12-01T12:00:00Z',
      ...r,
    });
  const withReport = (raw: string, extra: Record<string, string> = {}): Workspace => ({
    ...live,
    metadata: { ...live.metadata, annotations: { keep: 'x', ...extra, 'dev.kruntimes.io/node-report': raw } },
  });
  const current = { name: 'create', cloneAttempts: 1, baseCommit: 'c'.repeat(40) };
  const reason = (r: { allowed: boolean; message?: string }): string =>
    r.allowed ? 'allowed' : ((r.message ?? '').split(':')[0] ?? '');

  it('allows the live sandbox Node to report for the current generation, epoch and clone dispatch', () => {
    const idle = report({ idle: { epoch: 4, idle: true } });
    assert.equal(reason(reviewWorkspaceUpdate(withReport(idle), live, pod('sbx-2'))), 'allowed');
    const clone = report({ clone: { operation: 'create', attempt: 1, result: 'succeeded', commit: 'c'.repeat(40) } });
    assert.equal(reason(reviewWorkspaceUpdate(withReport(clone), live, pod('sbx-2'), current)), 'allowed');
  });

  it('fences stale generations, other sandboxes, other pods, old epochs and stale clone dispatches', () => {
    const cases: [string, string, string][] = [
      [report({ generation: 1 }), 'sbx-2', 'stale_node'],
      [report({ sandboxId: 'sbx-1' }), 'sbx-1', 'stale_sandbox'],
      [report({}), 'sbx-1', 'node_identity_mismatch'],
      [report({ nodeId: 'other' }), 'sbx-2', 'stale_node'],
      [report({ idle: { epoch: 3, idle: true } }), 'sbx-2', 'stale_idle_proof'],
      [report({ clone: { operation: 'create', attempt: 0, result: 'failed' } }), 'sbx-2', 'stale_clone_report'],
      [
        report({ clone: { operation: 'create', attempt: 1, result: 'succeeded', commit: 'd'.repeat(40) } }),
        'sbx-2',
        'base_commit_mismatch',
      ],
      ['{"nodeId":1}', 'sbx-2', 'invalid_node_report'],
    ];
    for (const [raw, podName, want] of cases) {
      assert.equal(reason(reviewWorkspaceUpdate(withReport(raw), live, pod(podName), current)), want, raw);
    }
  });

  it('plugin results only for the current operation and its frozen plugin set (409 stale_plugin_report)', () => {
    const plugins = { ...current, pluginIds: ['ws-plg-a'] };
    const ok = report({ plugins: { operation: 'create', results: [{ id: 'ws-plg-a', result: 'installed' }] } });
    assert.equal(reason(reviewWorkspaceUpdate(withReport(ok), live, pod('sbx-2'), plugins)), 'allowed');
    const cases: [string, string][] = [
      [
        report({ plugins: { operation: 'other', results: [{ id: 'ws-plg-a', result: 'installed' }] } }),
        'stale_plugin_report',
      ],
      [
        report({ plugins: { operation: 'create', results: [{ id: 'ws-plg-b', result: 'installed' }] } }),
        'stale_plugin_report',
      ],
      [
        report({ plugins: { operation: 'create', results: [{ id: 'ws-plg-a', result: 'done' }] } }),
        'invalid_node_report',
      ],
      [report({ generation: 1, plugins: { operation: 'create', results: [] } }), 'stale_node'],
    ];
    for (const [raw, want] of cases) {
      assert.equal(reason(reviewWorkspaceUpdate(withReport(raw), live, pod('sbx-2'), plugins)), want, raw);
    }
    assert.equal(reason(reviewWorkspaceUpdate(withReport(ok), live, pod('sbx-2'), current)), 'stale_plugin_report');
    const again = report({
      heartbeatAt: '2026-12-01T12:00:10Z',
      plugins: { operation: 'create', results: [{ id: 'ws-plg-a', result: 'installed' }] },
    });
    assert.equal(
      reason(reviewWorkspaceUpdate(withReport(again), withReport(ok), pod('sbx-2'), current)),
      'allowed',
      'an unchanged plugins part (a heartbeat after the step) is not fenced again',
    );
  });

  it('an OpenSandbox Node: the ServiceAccount named by its sandbox instance ID, fenced the same way', () => {
    const sa = (name: string): { username: string } => ({ username: `system:serviceaccount:t:${name}` });
    const osb: Workspace = { ...live, status: { ...live.status, sandbox: { id: 'ws-sbx-2', generation: 2 } } };
    const r = (x: Record<string, unknown>): Workspace => ({
      ...withReport(report({ sandboxId: 'ws-sbx-2', nodeId: 'ws-sbx-2-node', ...x })),
      status: osb.status,
    });
    assert.equal(reason(reviewWorkspaceUpdate(r({}), osb, sa('ws-sbx-2'))), 'allowed');
    assert.equal(reason(reviewWorkspaceUpdate(r({}), osb, sa('ws-sbx-1'))), 'node_identity_mismatch');
    assert.equal(reason(reviewWorkspaceUpdate(r({ generation: 1 }), osb, sa('ws-sbx-2'))), 'stale_node');
    assert.equal(reason(reviewWorkspaceUpdate(r({}), osb, sa('builder'))), 'node_report_reserved');
    const unbound = { username: 'system:serviceaccount:t:kruntimes-devws-node' };
    assert.equal(reason(reviewWorkspaceUpdate(r({}), osb, unbound)), 'node_identity_mismatch');
  });

  it('an unchanged idle or clone part (a heartbeat) is not fenced again', () => {
    const old = withReport(report({ idle: { epoch: 3, idle: true } }));
    const beat = withReport(report({ idle: { epoch: 3, idle: true }, heartbeatAt: '2026-12-01T12:00:10Z' }));
    assert.equal(reason(reviewWorkspaceUpdate(beat, old, pod('sbx-2'))), 'allowed');
  });

  it('the Node may change nothing else, and nobody else may write the report', () => {
    const r = report({});
    const spec = { ...withReport(r), spec: { ...live.spec, desiredState: 'stopped' as const } };
    assert.equal(reason(reviewWorkspaceUpdate(spec, live, pod('sbx-2'))), 'node_write_scope');
    assert.equal(reason(reviewWorkspaceUpdate(withReport(r, { other: 'y' }), live, pod('sbx-2'))), 'node_write_scope');
    assert.equal(reason(reviewWorkspaceUpdate(withReport(r), live, { username: 'alice' })), 'node_report_reserved');
    assert.equal(reason(reviewWorkspaceUpdate(live, withReport(r), { username: 'alice' })), 'node_report_reserved');
    const relabel = { ...live, metadata: { ...live.metadata, labels: { a: 'b' } } };
    assert.equal(reason(reviewWorkspaceUpdate(relabel, live, { username: 'alice' })), 'allowed');
  });
});
