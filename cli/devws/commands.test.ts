import assert from 'node:assert/strict';
import type { Operation, Project, Workspace } from '../../lib/devws/api.ts';
import {
  isolatedManifest,
  operationManifest,
  operationRows,
  pluginRows,
  progressLine,
  readManifest,
  projectDeleteManifest,
  projectManifest,
  syncProgress,
  syncRequested,
  workspaceRows,
} from './commands.ts';

const ws: Workspace = {
  metadata: { name: 'p1-main', creationTimestamp: new Date().toISOString() },
  spec: { project: 'p1', kind: 'main', desiredState: 'running' },
  status: {
    observedState: 'stopping',
    admissionOpen: false,
    admissionEpoch: 3,
    runtimeGeneration: 2,
    operation: { name: 'p1-main-stop-x', step: 'quiesce' },
  },
};
const op = (status: Operation['status']): Operation => ({
  metadata: { name: 'p1-main-stop-x' },
  spec: { project: 'p1', workspace: 'p1-main', kind: 'stop' },
  status,
});

describe('krt project | workspace | op', () => {
  it('a lifecycle action is an Operation of the Workspace, named after it', () => {
    const o = operationManifest('delete_workspace', ws);
    assert.deepEqual(o.spec, { project: 'p1', workspace: 'p1-main', kind: 'delete_workspace' });
    assert.equal(o.metadata.generateName, 'p1-main-delete-');
    assert.equal(operationManifest('restart', ws).metadata.generateName, 'p1-main-restart-');
  });

  it('krt workspace plugin install|remove: install_plugin with name and manifest, remove_plugin with the name only', () => {
    const i = operationManifest('install_plugin', ws, { name: 'lint', manifest: '{}' });
    assert.deepEqual(i.spec, {
      project: 'p1',
      workspace: 'p1-main',
      kind: 'install_plugin',
      plugin: { name: 'lint', manifest: '{}' },
    });
    assert.equal(i.metadata.generateName, 'p1-main-install-plugin-');
    assert.equal(
      operationManifest('remove_plugin', ws, { name: 'lint' }).metadata.generateName,
      'p1-main-remove-plugin-',
    );
    assert.throws(() => readManifest('nope', 'm.json'), /m.json: a plugin manifest is JSON/);
    assert.throws(() => readManifest(`"${'x'.repeat(4100)}"`, 'm.json'), /at most 4096/);
    const w = {
      ...ws,
      status: {
        plugins: [{ name: 'bad', state: 'failed' as const, operation: 'op1', message: 'invalid_plugin_manifest: x' }],
      },
    };
    assert.match(pluginRows(w), /bad\s+failed\s+op1\s+invalid_plugin_manifest: x/);
  });

  it('krt project delete is a delete_project Operation of the Project, without a Workspace', () => {
    const o = projectDeleteManifest('p1');
    assert.deepEqual(o.spec, { project: 'p1', kind: 'delete_project' });
    assert.equal(o.metadata.generateName, 'p1-delete-');
  });

  it('krt project sync bumps spec.syncRequests by one and follows the sync that answers it', () => {
    const p: Project = projectManifest('p1', 'https://h/o/r.git', 'main');
    assert.equal(syncRequested(p).spec.syncRequests, 1);
    assert.equal(syncRequested(syncRequested(p)).spec.syncRequests, 2);
    const at = (sync: NonNullable<Project['status']>['sync']): Project => ({
      ...p,
      status: { lifecycle: 'active', sync, snapshot: { ref: 'r', commit: 'c'.repeat(40) } },
    });
    assert.equal(syncProgress(at({ state: 'succeeded', operationId: 'p1-sync-1', requestsSeen: 0 }), 1), undefined);
    assert.deepEqual(syncProgress(at({ state: 'running', operationId: 'p1-sync-2', requestsSeen: 1 }), 1), {
      line: 'p1-sync-2 running',
      ended: false,
    });
    assert.deepEqual(syncProgress(at({ state: 'succeeded', operationId: 'p1-sync-2', requestsSeen: 1 }), 1), {
      line: `p1-sync-2 succeeded snapshot ${'c'.repeat(12)}`,
      ended: true,
    });
    assert.equal(syncProgress(at({ state: 'failed', operationId: 'p1-sync-3', requestsSeen: 2 }), 1)?.ended, true);
  });

  it('an isolated Workspace keeps an empty baseRef (allowed) and leaves an absent one out', () => {
    assert.equal(isolatedManifest('t1', 'p1', { baseRef: '' }).spec.baseRef, '');
    assert.ok(!('baseRef' in isolatedManifest('t1', 'p1', {}).spec));
  });

  it('the progress line shows state, step and position, the reason and the retry time', () => {
    const steps = ['quiesce', 'terminate', 'done'] as const;
    assert.equal(
      progressLine(op({ state: 'running', step: 'terminate', steps: [...steps] })),
      'op/p1-main-stop-x stop: running step terminate (2/3)',
    );
    assert.equal(
      progressLine(op({ state: 'succeeded', step: 'done', steps: [...steps] })),
      'op/p1-main-stop-x stop: succeeded step done (3/3)',
    );
    const at = '2026-12-01T12:00:10.000Z';
    assert.equal(
      progressLine(op({ state: 'retry_wait', step: 'quiesce', steps: [...steps], reason: 'x', retryAt: at })),
      `op/p1-main-stop-x stop: retry_wait step quiesce (1/3) [x] retry at ${at}`,
    );
    assert.equal(progressLine(op(undefined)), 'op/p1-main-stop-x stop: queued step -');
  });

  it('tables show desired/observed state, admission, generation and the current step', () => {
    const row = workspaceRows([ws]).split('\n')[1] ?? '';
    assert.match(row, /^p1-main\s+p1\s+main\s+running\s+stopping\s+closed\/3\s+2\s+p1-main-stop-x\s+quiesce\s+\d+s$/);
    const o = operationRows([op({ state: 'failed', step: 'quiesce', reason: 'resource_in_use' })]).split('\n')[1];
    assert.match(o ?? '', /^p1-main-stop-x\s+stop\s+p1-main\s+failed\s+quiesce\s+resource_in_use/);
  });
});
