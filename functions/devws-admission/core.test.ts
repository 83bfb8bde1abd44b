import assert from 'node:assert/strict';
import type { Operation, Project, Workspace } from '../../lib/devws/api.ts';
import { reviewOperation, reviewProject, reviewRetry, reviewWorkspace } from './core.ts';

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
});
