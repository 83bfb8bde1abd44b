import assert from 'node:assert/strict';
import type { Operation, Workspace } from './api.ts';
import { decideNode, type JournalEntry, type NodeView } from './node-agent.ts';

const NOW = new Date('2026-12-01T12:00:00Z');
const self = { nodeId: 'sbx-2-node', incarnation: 'i1', sandboxId: 'sbx-2', generation: 2 };
const input = {
  repositoryUrl: 'https://git/t/p1.git',
  snapshotRef: 'refs/ora/upstreams/b/snapshots/c',
  baseCommit: 'c'.repeat(40),
  workspaceBranch: 'refs/heads/workspaces/w1/main',
};
const ws = (st: Partial<NonNullable<Workspace['status']>> = {}): Workspace => ({
  metadata: { name: 'w1', namespace: 't' },
  spec: { project: 'p1', kind: 'main', desiredState: 'running' },
  status: {
    observedState: 'provisioning',
    runtimeGeneration: 2,
    admissionEpoch: 1,
    admissionOpen: false,
    requestedRef: 'main',
    sandbox: { id: 'sbx-2', generation: 2, nodeId: 'sbx-2-node' },
    operation: { name: 'create', state: 'running', step: 'clone' },
    ...st,
  },
});
const cloning = (attempts = 0, extra: Partial<NonNullable<Operation['status']>> = {}): Operation => ({
  metadata: { name: 'create' },
  spec: { project: 'p1', workspace: 'w1', kind: 'create_project' },
  status: { state: 'running', step: 'clone', cloneInput: input, cloneAttempts: attempts, ...extra },
});
const view = (v: Partial<NodeView>, journal: JournalEntry = { state: 'none' }): NodeView => ({
  self,
  ws: ws(),
  now: NOW,
  journal: () => journal,
  busy: false,
  ...v,
});
const fresh = { ...self, heartbeatAt: NOW.toISOString() };

describe('devws-node decisions', () => {
  it('a Node of an older generation or another sandbox is fenced and writes nothing', () => {
    assert.equal(decideNode(view({ ws: ws({ runtimeGeneration: 3 }) })).kind, 'stale');
    assert.equal(
      decideNode(view({ ws: ws({ sandbox: { id: 'sbx-2', generation: 2, terminated: true } }) })).kind,
      'stale',
    );
  });

  it('registers at once, then renews its heartbeat every 10 s', () => {
    assert.equal(decideNode(view({ ws: ws({ operation: undefined }) })).kind, 'report');
    const later = (ms: number): string =>
      decideNode(view({ ws: ws({ operation: undefined }), last: fresh, now: new Date(NOW.getTime() + ms) })).kind;
    assert.equal(later(9_000), 'none');
    assert.equal(later(10_000), 'report');
  });

  it('clones the current dispatch once per attempt; a new attempt clones again', () => {
    const act = decideNode(view({ op: cloning(0), last: fresh }));
    assert.equal(act.kind, 'clone');
    if (act.kind === 'clone') assert.deepEqual([act.attempt, act.input, act.localBranch], [0, input, 'main']);
    const reported = { ...fresh, clone: { operation: 'create', attempt: 0, result: 'failed' as const } };
    assert.equal(decideNode(view({ op: cloning(0), last: reported })).kind, 'none');
    assert.equal(decideNode(view({ op: cloning(1), last: reported })).kind, 'clone');
  });

  it('takes the local branch from the frozen input: a Workspace read before the node step wrote requestedRef still clones the right branch', () => {
    // The Node reads its Workspace, then the Operation: the first read may predate the Workspace
    // write of the node step (requestedRef) while the second already has the frozen input.
    const early = ws({ requestedRef: undefined });
    const act = decideNode(view({ ws: early, op: cloning(0), last: fresh }));
    assert.ok(act.kind === 'clone' && act.localBranch === 'main', JSON.stringify(act));
    const foreign = { ...input, workspaceBranch: 'refs/heads/workspaces/w2/main' };
    const other = decideNode(view({ op: cloning(0, { cloneInput: foreign }), last: fresh }));
    assert.notEqual(other.kind, 'clone', "never a branch of another Workspace's input");
  });

  it('never clones while the result is unknown, on another step, or for an operation that is not current', () => {
    assert.equal(decideNode(view({ op: cloning(0, { cloneUnknown: true }), last: fresh })).kind, 'none');
    assert.equal(decideNode(view({ op: cloning(0, { state: 'retry_wait' }), last: fresh })).kind, 'none');
    const other = { ...cloning(0), metadata: { name: 'old' } };
    assert.equal(decideNode(view({ op: other, last: fresh })).kind, 'none');
  });

  it('clone_result_unknown: a clone started by an earlier incarnation and never finished is reported unknown, not re-run', () => {
    const act = decideNode(view({ op: cloning(0), last: fresh }, { state: 'started' }));
    assert.equal(act.kind, 'report');
    if (act.kind === 'report')
      assert.deepEqual(act.report.clone, { operation: 'create', attempt: 0, result: 'unknown' });
    const done = { operation: 'create', attempt: 0, result: 'succeeded' as const, commit: 'c'.repeat(40) };
    const again = decideNode(view({ op: cloning(0), last: fresh }, { state: 'done', clone: done }));
    assert.ok(again.kind === 'report' && again.report.clone === done, 'a journaled result is reported, not re-cloned');
  });

  it('gives one idle proof per admission epoch while the Workspace quiesces, not idle when busy', () => {
    const stopping = ws({ observedState: 'stopping', admissionEpoch: 5, operation: { name: 'stop1' } });
    const act = decideNode(view({ ws: stopping, last: fresh }));
    assert.ok(act.kind === 'report' && act.report.idle?.epoch === 5 && act.report.idle.idle);
    const busy = decideNode(view({ ws: stopping, last: fresh, busy: true }));
    assert.ok(busy.kind === 'report' && busy.report.idle?.idle === false);
    const proven = { ...fresh, idle: { epoch: 5, idle: true } };
    assert.equal(decideNode(view({ ws: stopping, last: proven })).kind, 'none');
    assert.equal(
      decideNode(view({ ws: ws({ observedState: 'ready', admissionOpen: true }), last: fresh })).kind,
      'none',
    );
  });

  it('runs the frozen plugin set of the current plugin step once per execution ID; never on another step or operation', () => {
    const lint = { id: 'ws-plg-a', name: 'lint', action: 'install' as const, manifest: '{}' };
    const fmt = { id: 'ws-plg-b', name: 'fmt', action: 'remove' as const };
    const items = [lint, fmt];
    const plugging = (extra: Partial<NonNullable<Operation['status']>> = {}): Operation => ({
      metadata: { name: 'inst' },
      spec: { project: 'p1', workspace: 'w1', kind: 'install_plugin', plugin: { name: 'lint', manifest: '{}' } },
      status: { state: 'running', step: 'plugin', plugins: items, ...extra },
    });
    const current = ws({ observedState: 'ready', operation: { name: 'inst', state: 'running', step: 'plugin' } });
    const act = decideNode(view({ ws: current, op: plugging(), last: fresh }));
    assert.ok(act.kind === 'plugins' && act.operation === 'inst');
    if (act.kind === 'plugins') assert.deepEqual(act.items, items);
    const half = {
      ...fresh,
      plugins: { operation: 'inst', results: [{ id: 'ws-plg-a', result: 'installed' as const }] },
    };
    const rest = decideNode(view({ ws: current, op: plugging(), last: half }));
    assert.ok(rest.kind === 'plugins' && rest.items.length === 1 && rest.items[0]?.id === 'ws-plg-b');
    const recorded = plugging({
      plugins: [
        { ...lint, result: 'installed' },
        { ...fmt, result: 'removed' },
      ],
    });
    assert.equal(
      decideNode(view({ ws: current, op: recorded, last: fresh })).kind,
      'none',
      'recorded results are not re-run',
    );
    assert.equal(decideNode(view({ ws: current, op: plugging({ step: 'done' }), last: fresh })).kind, 'none');
    assert.equal(decideNode(view({ ws: current, op: plugging({ state: 'blocked' }), last: fresh })).kind, 'none');
    const other = { ...plugging(), metadata: { name: 'old' } };
    assert.equal(decideNode(view({ ws: current, op: other, last: fresh })).kind, 'none');
    assert.equal(decideNode(view({ ws: ws({ runtimeGeneration: 3 }), op: plugging(), last: fresh })).kind, 'stale');
  });
});
