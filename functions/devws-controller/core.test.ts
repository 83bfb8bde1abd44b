/**
 * devws-controller against an in-memory state: the handler's writes are applied as the relay
 * would (creates idempotent, status writes replace, deletes remove) and Pods become Ready as the
 * node agent would report them. Proves the create -> ready -> stop -> start path and the lease
 * epoch fence end to end at the decision level.
 */
import assert from 'node:assert/strict';
import { D, type Operation, type Project, type Workspace } from '../../lib/devws/api.ts';
import { FakeState } from '../../lib/fn/fake-state.ts';
import { R } from '../../lib/fn/resources.ts';
import type { Operation as FnOp } from '../../lib/fn/types.ts';
import { contextFor, initProject, initWorkspace, nodeHealth, reconcileOperation } from './core.ts';
import { CLONE_REPORT, IDLE_REPORT } from './steps.ts';

const NS = 'team';
const COMMIT = 'c'.repeat(40);
let clock = new Date('2026-12-01T12:00:00Z');
let uid = 0;

/** The status writes in the order the relay would apply them: "<Kind>/<name>:<state>". */
const writes: string[] = [];

function apply(state: FakeState, ops: FnOp[]): void {
  // The host writes consecutive status operations in parallel: ordered writes need a barrier.
  ops.forEach((o, i) =>
    assert.ok(!(o.op === 'status' && ops[i + 1]?.op === 'status'), 'two status writes in one parallel batch'),
  );
  for (const o of ops) {
    if (o.op === 'status') {
      const st = o.object.status as { state?: string; observedState?: string };
      writes.push(`${o.resource.kind}/${o.object.metadata.name ?? ''}:${st.state ?? st.observedState ?? ''}`);
    }
    if (o.op === 'create' && !state.get(o.resource, o.object.metadata.namespace, o.object.metadata.name ?? '')) {
      state.put(o.resource, {
        ...o.object,
        metadata: { ...o.object.metadata, uid: `uid-${++uid}`, creationTimestamp: clock.toISOString() },
      });
    }
    if (o.op === 'status') state.put(o.resource, o.object);
    if (o.op === 'delete') state.remove(o.resource, o.namespace, o.name);
  }
}

/** What the node agent would do: every sandbox Pod runs and is Ready. */
let podsReady = 'True';

/** The node agent's view: sandbox Pods run and are Ready unless a test takes readiness away. */
function kubelet(state: FakeState): void {
  for (const p of state.list(D.pods, NS)) {
    state.put(D.pods, {
      ...p,
      status: { phase: 'Running', conditions: [{ type: 'Ready', status: podsReady }] },
    });
  }
}

function step(state: FakeState, epoch: number): number {
  let writes = 0;
  const run = (ops: FnOp[]): void => {
    writes += ops.filter((o) => o.op !== 'requeue').length;
    apply(state, ops);
  };
  for (const p of state.list(D.projects, NS)) run(initProject(p as Project));
  for (const w of state.list(D.workspaces, NS)) {
    const ws = w as Workspace;
    run(initWorkspace(ws, state.get(D.projects, NS, ws.spec.project) as Project | undefined));
  }
  for (const o of state.list(D.operations, NS)) {
    const ctx = contextFor(o as Operation, state, clock, epoch, 'https://git.local');
    if (ctx) run(reconcileOperation(ctx));
  }
  for (const w of state.list(D.workspaces, NS)) {
    const current = (w as Workspace).status?.operation?.name;
    const o = current ? (state.get(D.operations, NS, current) as Operation | undefined) : undefined;
    if (o?.status?.state === 'succeeded' || o?.status?.state === 'failed')
      run(nodeHealth(w as Workspace, state, clock));
  }
  kubelet(state);
  return writes;
}

/** Runs until nothing is written for three rounds 5 s apart (retry_wait deferrals come due meanwhile). */
function settle(state: FakeState, epoch = 1): void {
  let idle = 0;
  for (let i = 0; i < 60; i++) {
    clock = new Date(clock.getTime() + (idle > 0 ? 5000 : 1000));
    idle = step(state, epoch) === 0 ? idle + 1 : 0;
    if (idle === 3) return;
  }
  assert.fail('the controller did not settle');
}

const op = (s: FakeState, name: string): Operation => s.get(D.operations, NS, name) as Operation;
const ws = (s: FakeState): Workspace => s.get(D.workspaces, NS, 'p1-main') as Workspace;

function annotate(s: FakeState, r: typeof D.operations, name: string, key: string, value: unknown): void {
  const o = s.get(r, NS, name)!;
  s.put(r, {
    ...o,
    metadata: { ...o.metadata, annotations: { ...o.metadata.annotations, [key]: JSON.stringify(value) } },
  });
}

function newState(): FakeState {
  const p: Project = {
    metadata: { name: 'p1', namespace: NS, uid: 'p-uid' },
    spec: { repository: { url: 'https://git.example/o/r.git', defaultBranch: 'main' } },
    status: { snapshot: { ref: `refs/ora/upstreams/b/snapshots/${COMMIT}`, commit: COMMIT } },
  };
  const s = new FakeState([[D.projects, p]]);
  settle(s);
  return s;
}

describe('devws-controller (in-memory state)', () => {
  it('create_project: sandbox, node, clone (frozen input), ready and succeeded together; Project active', () => {
    const s = newState();
    assert.equal(op(s, 'p1-create').status?.step, 'clone');
    assert.equal(op(s, 'p1-create').status?.cloneInput?.baseCommit, COMMIT);
    annotate(s, D.operations, 'p1-create', CLONE_REPORT, { attempt: 0, result: 'succeeded', commit: 'd'.repeat(40) });
    settle(s);
    assert.equal(op(s, 'p1-create').status?.step, 'clone', 'base_commit_mismatch is not recorded');
    annotate(s, D.operations, 'p1-create', CLONE_REPORT, { attempt: 0, result: 'succeeded', commit: COMMIT });
    settle(s);
    assert.equal(op(s, 'p1-create').status?.state, 'succeeded');
    assert.equal(ws(s).status?.observedState, 'ready');
    assert.equal(ws(s).status?.admissionOpen, true);
    assert.equal(ws(s).status?.baseCommitId, COMMIT);
    assert.equal(ws(s).status?.workspaceBranch, 'refs/heads/workspaces/p1-main/main');
    assert.equal((s.get(D.projects, NS, 'p1') as Project).status?.lifecycle, 'active');
    const events = s.list(R.events, NS).map((e) => (e as { message?: string }).message);
    assert.ok(events.includes('create_project: running on step clone'), 'an Event per step transition');
    assert.ok(events.includes('create_project: succeeded on step done'));
    assert.equal(s.list(D.pods, NS).length, 1, 'exactly one sandbox');
  });

  it('stop proves idleness for the new admission epoch, terminates the sandbox; start mounts the same data without re-cloning', () => {
    const s = newState();
    annotate(s, D.operations, 'p1-create', CLONE_REPORT, { attempt: 0, result: 'succeeded', commit: COMMIT });
    settle(s);
    const epoch = ws(s).status?.admissionEpoch ?? 0;
    apply(s, [
      {
        op: 'create',
        resource: D.operations,
        object: {
          metadata: { name: 'stop1', namespace: NS },
          spec: { project: 'p1', workspace: 'p1-main', kind: 'stop' },
        },
      },
    ]);
    settle(s);
    assert.equal(op(s, 'stop1').status?.step, 'quiesce');
    assert.equal(ws(s).status?.admissionOpen, false);
    assert.equal(ws(s).status?.admissionEpoch, epoch + 1);
    annotate(s, D.workspaces, 'p1-main', IDLE_REPORT, { epoch: epoch + 1, idle: true, generation: 0 });
    settle(s);
    assert.equal(op(s, 'stop1').status?.step, 'quiesce', 'a report of an old generation does not count (stale_node)');
    annotate(s, D.workspaces, 'p1-main', IDLE_REPORT, { epoch, idle: true, generation: 1 });
    settle(s);
    assert.equal(op(s, 'stop1').status?.step, 'quiesce', 'a proof for the old epoch does not count');
    annotate(s, D.workspaces, 'p1-main', IDLE_REPORT, { epoch: epoch + 1, idle: true, generation: 1 });
    settle(s);
    assert.equal(op(s, 'stop1').status?.state, 'succeeded');
    assert.equal(ws(s).status?.observedState, 'stopped');
    assert.ok(
      writes.indexOf('Workspace/p1-main:stopped') < writes.indexOf('Operation/stop1:succeeded'),
      'the Workspace (commit point) is written before the Operation is finished',
    );
    assert.equal(s.list(D.pods, NS).length, 0);
    assert.equal(s.list(D.pvcs, NS).length, 1, 'stop keeps the data');
    apply(s, [
      {
        op: 'create',
        resource: D.operations,
        object: {
          metadata: { name: 'start1', namespace: NS },
          spec: { project: 'p1', workspace: 'p1-main', kind: 'start' },
        },
      },
    ]);
    settle(s);
    assert.equal(op(s, 'start1').status?.state, 'succeeded');
    assert.deepEqual(op(s, 'start1').status?.steps, ['sandbox', 'node', 'done']);
    assert.equal(ws(s).status?.observedState, 'ready');
    assert.equal(ws(s).status?.runtimeGeneration, 2);
  });

  it('node disconnect: a ready Workspace goes unavailable with admission closed; the same Node Ready again restores it', () => {
    const s = newState();
    annotate(s, D.operations, 'p1-create', CLONE_REPORT, { attempt: 0, result: 'succeeded', commit: COMMIT });
    settle(s);
    const epoch = ws(s).status?.admissionEpoch ?? 0;
    podsReady = 'False';
    try {
      settle(s);
      assert.equal(ws(s).status?.observedState, 'unavailable');
      assert.equal(ws(s).status?.admissionOpen, false);
      assert.equal(ws(s).status?.admissionEpoch, epoch + 1);
    } finally {
      podsReady = 'True';
    }
    settle(s);
    assert.equal(ws(s).status?.observedState, 'ready');
    assert.equal(ws(s).status?.admissionOpen, true);
  });

  it('reconcile_required: effects of an older lease epoch are re-observed by ID before the operation advances', () => {
    const s = newState();
    const effects = op(s, 'p1-create').status?.effects ?? [];
    assert.equal(effects[0]?.leaseEpoch, 1);
    const before = JSON.stringify(op(s, 'p1-create').status?.step);
    step(s, 2);
    const after = op(s, 'p1-create').status;
    assert.equal(JSON.stringify(after?.step), before, 'nothing advanced in the reconciling write');
    assert.equal(after?.effects?.[0]?.leaseEpoch, 2);
    assert.equal(after?.effects?.[0]?.outcome, 'succeeded', 'the sandbox was found by its ID');
    assert.equal(s.list(D.pods, NS).length, 1, 'no second sandbox');
  });
});
