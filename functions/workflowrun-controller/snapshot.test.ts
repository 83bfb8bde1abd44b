import assert from 'node:assert/strict';
import { FakeState } from '../../lib/fn/fake-state.ts';
import { R } from '../../lib/fn/resources.ts';
import type { Operation } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { reconcileWorkflowRun, SNAPSHOT_MAX_BYTES } from './index.ts';

const NOW = new Date('2026-11-29T12:00:00Z');
const action = (script: string): KubeObject => ({
  metadata: { name: 'greet', namespace: 'ns', uid: 'a1' },
  spec: { steps: [{ name: 'say', run: script }] },
});
const wfr = (status?: object): KubeObject => ({
  metadata: { name: 'ci', namespace: 'ns', uid: 'w1', generation: 1 },
  spec: { jobs: { build: { 'runs-on': 'bash', steps: [{ name: 'hello', uses: 'greet' }] } } },
  ...(status ? { status } : {}),
});
const creates = (ops: Operation[], r = R.runs): KubeObject[] =>
  ops.flatMap((o) => (o.op === 'create' && o.resource === r ? [o.object] : []));
const statusOf = (ops: Operation[]): Record<string, unknown> | undefined =>
  ops.flatMap((o) => (o.op === 'status' ? [(o.object as { status?: Record<string, unknown> }).status] : []))[0];

describe('workflowrun-controller: execution snapshot (ControllerRevision)', () => {
  it('freezes the Actions at start; a later edit of the Action does not change the running WorkflowRun', () => {
    const state = new FakeState([[R.actions, action('echo v1')]]);
    const start = reconcileWorkflowRun({ key: 'ns/ci', object: wfr(), state, now: NOW });
    const [rev] = creates(start, R.controllerRevisions);
    assert.ok(rev, 'a ControllerRevision is created');
    assert.ok(
      start.findIndex((o) => o.op === 'create') < start.findIndex((o) => o.op === 'status'),
      'the snapshot exists before status names it',
    );
    const st = statusOf(start);
    assert.equal(st?.snapshotName, rev.metadata.name);
    assert.equal(rev.metadata.labels?.['kruntimes.io/workflowrun-uid'], 'w1');
    assert.equal(rev.metadata.ownerReferences?.[0]?.uid, 'w1');

    state.put(R.controllerRevisions, { ...rev, metadata: { ...rev.metadata, namespace: 'ns' } });
    state.put(R.actions, action('echo v2-EDITED'));
    const next = reconcileWorkflowRun({ key: 'ns/ci', object: wfr(st), state, now: NOW });
    const run = creates(next)[0] as (KubeObject & { spec: { source?: { inline?: string } } }) | undefined;
    assert.ok(run, 'the step Run is created');
    assert.match(JSON.stringify(run.spec), /echo v1/);
    assert.doesNotMatch(JSON.stringify(run.spec), /EDITED/);

    state.remove(R.actions, 'ns', 'greet');
    const afterDelete = reconcileWorkflowRun({ key: 'ns/ci', object: wfr(st), state, now: NOW });
    assert.match(
      JSON.stringify(creates(afterDelete)[0]?.spec),
      /echo v1/,
      'a deleted Action is still run from the snapshot',
    );
  });

  it('rejects a run whose Actions exceed the snapshot size, creating nothing', () => {
    const big = action(`echo ${'x'.repeat(SNAPSHOT_MAX_BYTES)}`);
    const ops = reconcileWorkflowRun({
      key: 'ns/ci',
      object: wfr(),
      state: new FakeState([[R.actions, big]]),
      now: NOW,
    });
    assert.equal(creates(ops, R.controllerRevisions).length, 0);
    assert.equal(statusOf(ops)?.phase, 'Failed');
    assert.match(String(statusOf(ops)?.message), /execution snapshot allows/);
  });
});

describe('workflowrun-controller: reusable Workflow calls bind when ready (upstream rules)', () => {
  const lib = (script: string): KubeObject => ({
    metadata: { name: 'lib', namespace: 'ns', uid: 'l1' },
    spec: { jobs: { inner: { 'runs-on': 'bash', steps: [{ name: 's', run: script }] } } },
  });
  const caller = (status?: object): KubeObject => ({
    metadata: { name: 'caller', namespace: 'ns', uid: 'c1', generation: 1 },
    spec: {
      jobs: {
        first: { 'runs-on': 'bash', steps: [{ name: 'wait', run: 'sleep 1' }] },
        call: { uses: 'lib', needs: ['first'] },
      },
    },
    ...(status ? { status } : {}),
  });
  const childSpec = (ops: Operation[]): string => JSON.stringify(creates(ops, R.workflowRuns)[0]?.spec ?? null);

  it('uses the called Workflow as it is when the call becomes ready, then keeps the child as created', () => {
    const state = new FakeState([[R.workflows, lib('echo v1')]]);
    const start = reconcileWorkflowRun({ key: 'ns/caller', object: caller(), state, now: NOW });
    const [rev] = creates(start, R.controllerRevisions);
    assert.ok(rev);
    assert.doesNotMatch(JSON.stringify(rev), /echo v1/, 'called Workflows are not frozen at start');
    state.put(R.controllerRevisions, rev);
    let st = statusOf(start);
    const running = reconcileWorkflowRun({ key: 'ns/caller', object: caller(st), state, now: NOW });
    const [firstRun] = creates(running);
    assert.ok(firstRun, 'the first job starts');
    assert.equal(childSpec(running), 'null', 'the call waits for its need');
    st = statusOf(running) ?? st;
    state.put(R.runs, {
      ...firstRun,
      metadata: { ...firstRun.metadata, namespace: 'ns' },
      status: { phase: 'Succeeded' },
    });
    state.put(R.workflows, lib('echo v2-EDITED-WHILE-FIRST-RAN'));
    const ready = reconcileWorkflowRun({ key: 'ns/caller', object: caller(st), state, now: NOW });
    assert.match(childSpec(ready), /v2-EDITED-WHILE-FIRST-RAN/, 'the edit made while the earlier job ran is used');
    const child = creates(ready, R.workflowRuns)[0] as KubeObject;
    st = statusOf(ready) ?? st;
    state.put(R.workflowRuns, { ...child, metadata: { ...child.metadata, namespace: 'ns' } });
    state.put(R.workflows, lib('echo v3-AFTER-CHILD'));
    const after = reconcileWorkflowRun({ key: 'ns/caller', object: caller(st), state, now: NOW });
    assert.doesNotMatch(JSON.stringify(after), /v3-AFTER-CHILD/, 'frozen once the child WorkflowRun exists');
  });
});
