import assert from 'node:assert/strict';
import { FakeState } from '../../lib/fn/fake-state.ts';
import { R } from '../../lib/fn/resources.ts';
import type { Operation, WatchTrigger } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import type { Condition } from '../../lib/run/conditions.ts';
import { stableJson } from '../../lib/kube/same-json.ts';
import scheduler from '../run-scheduler/index.ts';
import workflowRuns from '../workflowrun-controller/index.ts';
import { reconcileWorkspaces } from './index.ts';
import {
  choosePod,
  decide,
  dueAt,
  pathFor,
  WORKSPACE_FINALIZER,
  type PodView,
  type Workspace,
  type WorkspaceStatus,
  usageOnly,
} from './lifecycle.ts';

const now = new Date('2026-07-06T12:00:00Z');
const later = new Date('2026-07-06T13:00:00Z');
const pod = (name: string, over: Partial<PodView> = {}): PodView => ({
  name,
  uid: `uid-${name}`,
  ready: true,
  deleting: false,
  phase: 'Running',
  ...over,
});
function ws(status?: WorkspaceStatus, over: Partial<Workspace['metadata']> = {}): Workspace {
  return {
    metadata: { name: 'w', namespace: 'ns', uid: 'ws-uid', finalizers: [WORKSPACE_FINALIZER], ...over },
    spec: { runtime: 'bash', ttlSecondsAfterUnused: 60, cleanupPolicy: 'DeleteAfterTTL' },
    ...(status ? { status } : {}),
  };
}
const bound = (over: WorkspaceStatus = {}): WorkspaceStatus => ({
  phase: 'Bound',
  runtime: 'bash',
  boundPod: 'p1',
  boundPodUID: 'uid-p1',
  path: pathFor('w'),
  ...over,
});
function statusOf(d: ReturnType<typeof decide>): WorkspaceStatus {
  assert.equal(d.kind, 'status', JSON.stringify(d));
  return (d as { status: WorkspaceStatus }).status;
}
const cond = (s: WorkspaceStatus, type: string): Condition | undefined => s.conditions?.find((c) => c.type === type);

describe('workspace-controller lifecycle (seed 000)', () => {
  it('waits without ready Pods, then binds by a stable hash of the UID over name-sorted ready Pods', () => {
    const waiting = statusOf(decide(ws(), [pod('p1', { ready: false })], 0, now));
    assert.equal(waiting.phase, 'Pending');
    assert.equal(cond(waiting, 'Bound')?.reason, 'NoReadyRuntimePods');
    const pods = [pod('p2'), pod('p1'), pod('p3', { deleting: true })];
    const s = statusOf(decide(ws(), pods, 0, now));
    const chosen = choosePod('ws-uid', [pod('p1'), pod('p2')]);
    assert.equal(s.phase, 'Bound');
    assert.equal(s.boundPod, chosen?.name);
    assert.equal(s.boundPodUID, chosen?.uid);
    assert.equal(s.path, '/workspace/persistent/w');
    assert.equal(s.lastUsedTime, now.toISOString(), 'a new Bound workspace without Runs starts its unused interval');
    assert.equal(choosePod('ws-uid', [pod('p2'), pod('p1')])?.name, chosen?.name, 'order of the list does not matter');
  });

  it('adds its finalizer to a Bound workspace first', () => {
    assert.deepEqual(decide(ws(bound(), { finalizers: [] }), [pod('p1')], 0, now), { kind: 'addFinalizer' });
  });

  it('binds a workspace without its finalizer in one decision, PodAvailable said in the same status', () => {
    const d = decide(ws(undefined, { finalizers: [] }), [pod('p1')], 1, now);
    assert.equal(d.kind, 'finalizeAndBind');
    const s = (d as { status: WorkspaceStatus }).status;
    assert.equal(s.phase, 'Bound');
    assert.equal(cond(s, 'PodAvailable')?.reason, 'PodReady');
    assert.equal(s.lastUsedTime, undefined, 'a Run already waits for it');
    const after = ws(JSON.parse(stableJson(s)) as WorkspaceStatus);
    assert.deepEqual(decide(after, [pod('p1')], 1, later), { kind: 'none' }, 'nothing left to write');
  });

  it('drops the finalizer of a workspace deleted before it was bound (no Pod holds data)', () => {
    const d = decide(ws(undefined, { deletionTimestamp: later.toISOString() }), [pod('p1')], 0, later);
    assert.equal(d.kind, 'removeFinalizer');
  });

  it('stays Bound while the Pod exists but is unready, and says so', () => {
    const s = statusOf(decide(ws(bound({ lastUsedTime: now.toISOString() })), [pod('p1', { ready: false })], 0, now));
    assert.equal(s.phase, 'Bound');
    assert.equal(cond(s, 'PodAvailable')?.status, 'False');
    assert.equal(cond(s, 'PodAvailable')?.reason, 'PodNotReady');
  });

  it('becomes Lost (never rebound) when the Pod is gone or replaced by one with another UID', () => {
    const gone = statusOf(decide(ws(bound()), [pod('p2')], 0, now));
    assert.equal(gone.phase, 'Lost');
    assert.equal(gone.boundPod, 'p1', 'binding kept');
    assert.match(cond(gone, 'Bound')?.message ?? '', /no longer exists/);
    const replaced = statusOf(decide(ws(bound()), [pod('p1', { uid: 'uid-new' })], 0, now));
    assert.equal(replaced.phase, 'Lost');
    assert.match(cond(replaced, 'Bound')?.message ?? '', /was replaced \(UID uid-new, bound to uid-p1\)/);
    assert.deepEqual(decide(ws({ ...bound(), phase: 'Lost' }), [pod('p1')], 0, now), { kind: 'none' });
  });

  it('clears lastUsedTime while Runs use the workspace and sets it once when the last one ends', () => {
    const active = statusOf(decide(ws(bound({ lastUsedTime: now.toISOString() })), [pod('p1')], 2, later));
    assert.equal(active.lastUsedTime, undefined);
    const ended = statusOf(decide(ws(active), [pod('p1')], 0, later));
    assert.equal(ended.lastUsedTime, later.toISOString());
    const next = decide(ws(ended), [pod('p1')], 0, new Date('2026-07-06T14:00:00Z'));
    assert.deepEqual(next, { kind: 'none' }, 'set only once');
  });

  it("does not write again a status it wrote, read back with the keys in the API server's order", () => {
    const serverOrder = (v: unknown): unknown => JSON.parse(stableJson(v));
    const first = statusOf(decide(ws(), [pod('p1')], 1, now));
    const again = decide(ws(serverOrder(first) as WorkspaceStatus), [pod('p1')], 1, later);
    const settled = again.kind === 'status' ? again.status : first;
    assert.deepEqual(decide(ws(serverOrder(settled) as WorkspaceStatus), [pod('p1')], 1, later), { kind: 'none' });
  });

  it('on deletion writes Released first and keeps the finalizer; a Lost workspace drops the finalizer itself', () => {
    const deleting = ws(bound(), { deletionTimestamp: later.toISOString() });
    const s = statusOf(decide(deleting, [pod('p1')], 0, later));
    assert.equal(s.phase, 'Released');
    assert.equal(cond(s, 'Released')?.reason, 'Deleting');
    assert.deepEqual(decide(ws(s, { deletionTimestamp: later.toISOString() }), [pod('p1')], 0, later), {
      kind: 'none',
    });
    const lostNow = statusOf(decide(ws(s, { deletionTimestamp: later.toISOString() }), [], 0, later));
    assert.equal(lostNow.phase, 'Lost', 'Released -> Lost when the bound Pod disappears during cleanup');
    const d = decide(ws(lostNow, { deletionTimestamp: later.toISOString() }), [], 0, later);
    assert.equal(d.kind, 'removeFinalizer');
  });

  it('requests the deletion of a Released workspace that has no deletionTimestamp yet', () => {
    assert.deepEqual(decide(ws(bound({ phase: 'Released' })), [pod('p1')], 0, later), { kind: 'delete' });
  });

  it('is due for cleanup only when Bound, DeleteAfterTTL, a TTL is set and lastUsedTime is known', () => {
    const last = now.toISOString();
    assert.equal(dueAt(ws(bound({ lastUsedTime: last }))), now.getTime() + 60_000);
    const nilTtl = ws(bound({ lastUsedTime: last }));
    delete nilTtl.spec.ttlSecondsAfterUnused;
    assert.equal(dueAt(nilTtl), undefined, 'nil TTL never deletes');
    const retain = ws(bound({ lastUsedTime: last }));
    retain.spec.cleanupPolicy = 'Retain';
    assert.equal(dueAt(retain), undefined, 'Retain never deletes automatically');
    assert.equal(dueAt(ws(bound())), undefined, 'in use (no lastUsedTime)');
    assert.equal(dueAt(ws(bound({ lastUsedTime: last, phase: 'Released' }))), undefined);
    assert.equal(dueAt(ws(bound({ lastUsedTime: last }), { deletionTimestamp: last })), undefined);
  });
});

describe('workspace-controller reconcile', () => {
  const run = (name: string, phase: string, over: Partial<KubeObject['metadata']> = {}): KubeObject => ({
    metadata: { name, namespace: 'ns', ...over },
    spec: { runtime: 'bash', workspace: { name: 'w' } },
    status: { phase },
  });
  const podObj = (name: string): KubeObject => ({
    metadata: { name, namespace: 'ns', uid: `uid-${name}`, labels: { runtime: 'bash' } },
    status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
  });

  it('counts only non-terminal, undeleted Runs of the workspace as active', () => {
    const state = new FakeState([
      [R.persistentWorkspaces, ws(bound({ lastUsedTime: now.toISOString() }))],
      [R.pods, podObj('p1')],
      [R.runs, run('done', 'Succeeded')],
      [R.runs, run('gone', 'Running', { deletionTimestamp: now.toISOString() })],
    ]);
    const idle = reconcileWorkspaces({ key: 'ns/bash', object: undefined, state, now: later });
    assert.equal(
      idle.some((o) => o.op === 'status'),
      true,
      'PodAvailable condition written, lastUsedTime kept',
    );
    const kept = (idle.find((o) => o.op === 'status') as Extract<Operation, { op: 'status' }>).object
      .status as WorkspaceStatus;
    assert.equal(kept.lastUsedTime, now.toISOString());
    state.put(R.runs, run('active', 'Scheduled'));
    const busy = reconcileWorkspaces({ key: 'ns/bash', object: undefined, state, now: later });
    const s = (busy.find((o) => o.op === 'status') as Extract<Operation, { op: 'status' }>).object
      .status as WorkspaceStatus;
    assert.equal(s.lastUsedTime, undefined);
  });

  it('binds in one invocation: the finalizer guarded by the resourceVersion, then the whole status', () => {
    const fresh: Workspace = { ...ws(), metadata: { ...ws().metadata, finalizers: [], resourceVersion: '7' } };
    const state = new FakeState([
      [R.persistentWorkspaces, fresh],
      [R.pods, podObj('p1')],
    ]);
    const ops = reconcileWorkspaces({ key: 'ns/bash', object: undefined, state, now: later });
    assert.equal(ops.length, 2);
    assert.deepEqual(ops[0], {
      op: 'patch',
      resource: R.persistentWorkspaces,
      namespace: 'ns',
      name: 'w',
      patch: { metadata: { resourceVersion: '7', finalizers: [WORKSPACE_FINALIZER] } },
    });
    const second = ops[1] as Extract<Operation, { op: 'patch' }>;
    assert.equal(second.subresource, 'status');
    assert.equal(second.patchType, 'json');
    const [add] = second.patch as { op: string; path: string; value: WorkspaceStatus }[];
    assert.equal(add?.path, '/status');
    assert.equal(add?.value.phase, 'Bound');
    assert.equal(cond(add?.value ?? {}, 'PodAvailable')?.status, 'True');
  });

  it('turns a delete decision into a UID-guarded delete', () => {
    const state = new FakeState([
      [R.persistentWorkspaces, ws(bound({ phase: 'Released' }))],
      [R.pods, podObj('p1')],
    ]);
    assert.deepEqual(reconcileWorkspaces({ key: 'ns/bash', object: undefined, state, now: later }), [
      { op: 'delete', resource: R.persistentWorkspaces, namespace: 'ns', name: 'w', uid: 'ws-uid' },
    ]);
  });
});

describe('workspace lastUsedTime updates wake nobody who does not read it (issue 17)', () => {
  const v = (rv: string, status: WorkspaceStatus): Workspace => ({
    ...ws(status),
    metadata: { ...ws().metadata, resourceVersion: rv, labels: { 'kruntimes.io/workflowrun-uid': 'u' } },
  });
  const used = v('1', bound());
  const unused = v('2', JSON.parse(stableJson(bound({ lastUsedTime: now.toISOString() }))) as WorkspaceStatus);
  const lost = v('3', bound({ phase: 'Lost', lastUsedTime: now.toISOString() }));

  it('usageOnly: an update that only sets or clears lastUsedTime, in whatever key order', () => {
    assert.equal(usageOnly({ type: 'updated', old: used, object: unused }), true);
    assert.equal(usageOnly({ type: 'updated', old: unused, object: used }), true);
    assert.equal(usageOnly({ type: 'updated', old: unused, object: lost }), false);
    assert.equal(usageOnly({ type: 'added', object: unused }), false);
    assert.equal(usageOnly({ type: 'deleted', object: unused, old: used }), false);
  });

  for (const fn of [scheduler, workflowRuns]) {
    it(`${fn.name} is not woken by lastUsedTime alone, and is by a phase change`, () => {
      const trigger = fn.trigger as WatchTrigger;
      const also = trigger.also?.find((a) => a.resource === R.persistentWorkspaces);
      assert.ok(also?.filter, 'a filter on workspace events');
      assert.equal(also.filter({ type: 'updated', old: used, object: unused }, 0), false);
      assert.equal(also.filter({ type: 'updated', old: unused, object: lost }, 0), true);
    });
  }
});
