import assert from 'node:assert/strict';
import { FakeState } from '../../lib/fn/fake-state.ts';
import { R } from '../../lib/fn/resources.ts';
import type { Operation } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { reconcileWorkflowRun, WAITING_FOR_WORKSPACE } from './index.ts';
import { DEFAULT_JOB_WORKSPACE, jobWorkspaceSpec } from './workspace-config.ts';

const NOW = new Date('2026-11-29T12:00:00Z');
const creates = (ops: Operation[], r = R.runs): KubeObject[] =>
  ops.flatMap((o) => (o.op === 'create' && o.resource === r ? [o.object] : []));
const statusOf = (ops: Operation[]): { conditions?: { type: string; status: string; message: string }[] } =>
  ops.flatMap((o) => (o.op === 'status' ? [(o.object as { status: object }).status] : []))[0] ?? {};

function wfr(labels: Record<string, string> = {}, status?: object): KubeObject {
  return {
    metadata: { name: 'demo', namespace: 'ns', uid: 'u1', generation: 1, labels },
    spec: {
      jobs: {
        build: { 'runs-on': 'bash', steps: [{ name: 'a', run: 'true' }] },
        call: { uses: 'lib' },
      },
    },
    ...(status ? { status } : {}),
  };
}
const lib: KubeObject = {
  metadata: { name: 'lib', namespace: 'ns' },
  spec: { jobs: { inner: { 'runs-on': 'bash', steps: [{ name: 's', run: 'true' }] } } },
};

/** Starts the WorkflowRun and returns the reconcile that creates its children. */
function started(labels: Record<string, string>, state = new FakeState([[R.workflows, lib]])): Operation[] {
  const init = reconcileWorkflowRun({ key: 'ns/demo', object: wfr(labels), state, now: NOW });
  const rev = creates(init, R.controllerRevisions)[0];
  if (rev) state.put(R.controllerRevisions, rev);
  return reconcileWorkflowRun({ key: 'ns/demo', object: wfr(labels, statusOf(init)), state, now: NOW });
}

describe('workflowrun-controller: seed labels and job workspaces', () => {
  it('labels child Runs and job workspaces with the Workflow and job names the seed affinity example selects', () => {
    const ops = started({ 'workflows.kruntimes.io/workflow': 'ci-data-sharing-demo' });
    const [run] = creates(ops);
    const [ws] = creates(ops, R.persistentWorkspaces);
    for (const o of [run, ws]) {
      assert.equal(o?.metadata.labels?.['workflows.kruntimes.io/workflow'], 'ci-data-sharing-demo');
      assert.equal(o?.metadata.labels?.['workflows.kruntimes.io/job'], 'build');
      assert.equal(o?.metadata.labels?.['workflows.kruntimes.io/workflowrun'], 'demo');
      assert.equal(o?.metadata.labels?.['kruntimes.io/workflow-job'], 'build');
    }
    const [child] = creates(ops, R.workflowRuns);
    assert.equal(child?.metadata.labels?.['workflows.kruntimes.io/workflow'], 'lib', 'a call runs the called Workflow');
  });

  it('uses the WorkflowRun name as the Workflow label of an inline WorkflowRun', () => {
    const [run] = creates(started({}));
    assert.equal(run?.metadata.labels?.['workflows.kruntimes.io/workflow'], 'demo');
  });

  it('creates job workspaces with the configured spec (default: DeleteAfterTTL after 3600 s)', () => {
    const [ws] = creates(started({}), R.persistentWorkspaces);
    assert.deepEqual(ws?.spec, { runtime: 'bash', ...DEFAULT_JOB_WORKSPACE });
    const state = new FakeState([[R.workflows, lib]]);
    const init = reconcileWorkflowRun({ key: 'ns/demo', object: wfr(), state, now: NOW });
    state.put(R.controllerRevisions, creates(init, R.controllerRevisions)[0]!);
    const cfg = { jobWorkspace: jobWorkspaceSpec({ KRT_JOB_WORKSPACE_TTL_SECONDS: 'none' }) };
    const ops = reconcileWorkflowRun({ key: 'ns/demo', object: wfr({}, statusOf(init)), state, now: NOW }, cfg);
    assert.deepEqual(creates(ops, R.persistentWorkspaces)[0]?.spec, {
      runtime: 'bash',
      mode: 'RuntimePodLocal',
      cleanupPolicy: 'DeleteAfterTTL',
    });
  });

  it('reads the job workspace spec from the environment and refuses bad values', () => {
    assert.deepEqual(jobWorkspaceSpec({}), DEFAULT_JOB_WORKSPACE);
    assert.deepEqual(
      jobWorkspaceSpec({ KRT_JOB_WORKSPACE_TTL_SECONDS: '60', KRT_JOB_WORKSPACE_CLEANUP_POLICY: 'Retain' }),
      { mode: 'RuntimePodLocal', cleanupPolicy: 'Retain', ttlSecondsAfterUnused: 60 },
    );
    assert.throws(() => jobWorkspaceSpec({ KRT_JOB_WORKSPACE_TTL_SECONDS: '-1' }), /KRT_JOB_WORKSPACE_TTL_SECONDS/);
    assert.throws(() => jobWorkspaceSpec({ KRT_JOB_WORKSPACE_TTL_SECONDS: '1h' }), /whole number/);
    assert.throws(() => jobWorkspaceSpec({ KRT_JOB_WORKSPACE_CLEANUP_POLICY: 'Delete' }), /DeleteAfterTTL or Retain/);
  });

  it('shows WaitingForWorkspace while a step Run waits for its job workspace, and clears it', () => {
    const state = new FakeState([[R.workflows, lib]]);
    const init = reconcileWorkflowRun({ key: 'ns/demo', object: wfr(), state, now: NOW });
    state.put(R.controllerRevisions, creates(init, R.controllerRevisions)[0]!);
    const ops = reconcileWorkflowRun({ key: 'ns/demo', object: wfr({}, statusOf(init)), state, now: NOW });
    const run = creates(ops)[0]!;
    const message = 'waiting for PersistentWorkspace "demo-x" to be bound';
    state.put(R.runs, { ...run, status: { phase: 'Pending', message } });
    let st = statusOf(ops);
    const waiting = statusOf(reconcileWorkflowRun({ key: 'ns/demo', object: wfr({}, st), state, now: NOW }));
    const c = waiting.conditions?.find((x) => x.type === WAITING_FOR_WORKSPACE);
    assert.equal(c?.status, 'True');
    assert.equal(c?.message, `job "build" is waiting for workspace: ${message}`);
    st = waiting;
    state.put(R.runs, { ...run, status: { phase: 'Running' } });
    const ready = statusOf(reconcileWorkflowRun({ key: 'ns/demo', object: wfr({}, st), state, now: NOW }));
    assert.equal(ready.conditions?.find((x) => x.type === WAITING_FOR_WORKSPACE)?.status, 'False');
  });
});
