/**
 * WorkflowRun controller (load -> calculate -> apply -> patch). The pure cores in
 * functions/workflow-core decide everything; this glue loads the observed children, creates
 * one PersistentWorkspace per inline job (owned by the WorkflowRun, never chosen by users), turns
 * the decisions into operations, and surfaces workspace loss as a clear condition.
 *
 * What is frozen when (docs/workflows.md, "What a run sees of later edits"):
 * - Actions: at start, in an owned ControllerRevision (status.snapshotName); editing or deleting
 *   an Action later never changes a running WorkflowRun.
 * - Called (reusable) Workflows, upstream's two rules: the call binds the Workflow's current
 *   template when the call job becomes ready (so an edit made while an earlier job runs is used),
 *   and is frozen from the moment its child WorkflowRun is created (the child's spec carries the
 *   materialized jobs, its annotations the output contract).
 */
import { R } from '../../lib/fn/resources.ts';
import type { FunctionDef, Operation, ReconcileInput, State } from '../../lib/fn/types.ts';
import type { KubeObject, OwnerReference } from '../../lib/kube/types.ts';
import { setCondition } from '../../lib/run/conditions.ts';
import { CONTROLLER_LABEL, JOB_NAME_LABEL, WORKFLOW_LABEL, WORKFLOWRUN_LABEL } from '../../lib/workflow/labels.ts';
import { isLabelValue } from '../../lib/workflow/names.ts';
import { jobWorkspaceSpec, type JobWorkspaceSpec } from './workspace-config.ts';
import {
  initialStatus,
  jobWorkspaceName,
  reconcileStatus,
  rejectedStatus,
  snapshotName,
  stepRefFromLabels,
  workflowRunProblem,
  LABEL_WORKFLOWRUN_UID,
  LABEL_WORKFLOW_JOB,
  LABEL_WORKFLOW_MATRIX,
  type ActionSnapshot,
  type ChildRunView,
  type ChildWorkflowRunView,
  type JobsSpec,
  type WorkflowRunStatus,
  type WorkflowSpec,
} from '../../lib/workflow/core.ts';
import { sameJson } from '../../lib/kube/same-json.ts';
import { usageOnly } from '../workspace-controller/lifecycle.ts';

interface Wfr extends KubeObject {
  spec: { jobs: JobsSpec; cancelRequested?: boolean };
  status?: WorkflowRunStatus;
}
/** The controller's configuration (read from the environment when the function loads). */
export interface ControllerConfig {
  jobWorkspace: JobWorkspaceSpec;
}

interface RunObj extends KubeObject {
  spec: { cancelRequested?: boolean; workspace?: { name: string } };
  status?: {
    phase?: string;
    outputs?: Record<string, string>;
    artifactRefs?: unknown[];
    startTime?: string;
    completionTime?: string;
    message?: string;
  };
}
type WsObj = KubeObject & { status?: { phase?: string } };

const owner = (w: Wfr): OwnerReference => ({
  apiVersion: 'kruntimes.io/v1alpha1',
  kind: 'WorkflowRun',
  name: w.metadata.name ?? '',
  uid: w.metadata.uid ?? '',
  controller: true,
  blockOwnerDeletion: true,
});
const isInline = (spec: JobsSpec[string] | undefined): boolean => !!spec?.steps && !spec.uses;

/** `{key: value}` when value is a valid label value (names longer than 63 characters get no label). */
const labelIf = (key: string, value: string | undefined): Record<string, string> =>
  value && isLabelValue(value) ? { [key]: value } : {};

/**
 * The labels the seed's affinity example selects, on child Runs and job workspaces: the Workflow
 * (the WorkflowRun's workflows.kruntimes.io/workflow label, set by `krt wf trigger/run` and on
 * called WorkflowRuns; the WorkflowRun's own name when it was written inline), the job, and the WorkflowRun.
 */
function workflowLabels(w: Wfr, job: string | undefined): Record<string, string> {
  return {
    ...labelIf(WORKFLOW_LABEL, w.metadata.labels?.[WORKFLOW_LABEL] ?? w.metadata.name),
    ...labelIf(JOB_NAME_LABEL, job),
    ...labelIf(WORKFLOWRUN_LABEL, w.metadata.name),
  };
}

function runViews(state: State, ns: string, uid: string): ChildRunView[] {
  return (state.list(R.runs, ns, { [LABEL_WORKFLOWRUN_UID]: uid }) as RunObj[]).flatMap((r) => {
    const ref = stepRefFromLabels(r.metadata.labels);
    if (!ref) return [];
    const s = r.status ?? {};
    return [
      {
        name: r.metadata.name ?? '',
        ref,
        ...(s.phase ? { phase: s.phase } : {}),
        ...(r.spec.cancelRequested ? { cancelRequested: true } : {}),
        ...(s.outputs ? { outputs: s.outputs } : {}),
        ...(s.artifactRefs ? { artifactRefs: s.artifactRefs as ChildRunView['artifactRefs'] } : {}),
        ...(s.startTime ? { startTime: s.startTime } : {}),
        ...(s.completionTime ? { completionTime: s.completionTime } : {}),
        ...(s.message ? { message: s.message } : {}),
      },
    ];
  });
}

function workflowRunViews(state: State, ns: string, uid: string): ChildWorkflowRunView[] {
  return (state.list(R.workflowRuns, ns, { [LABEL_WORKFLOWRUN_UID]: uid }) as Wfr[])
    .filter((c) => c.metadata.ownerReferences?.some((o) => o.controller && o.uid === uid))
    .map((c) => ({
      name: c.metadata.name ?? '',
      job: c.metadata.labels?.[LABEL_WORKFLOW_JOB] ?? '',
      ...(c.metadata.labels?.[LABEL_WORKFLOW_MATRIX] ? { combination: c.metadata.labels[LABEL_WORKFLOW_MATRIX] } : {}),
      ...(c.status?.phase ? { phase: c.status.phase } : {}),
      ...(c.spec.cancelRequested ? { cancelRequested: true } : {}),
      ...(c.status?.jobs ? { jobs: c.status.jobs } : {}),
      ...(c.metadata.annotations ? { annotations: c.metadata.annotations } : {}),
      ...(c.status?.message ? { message: c.status.message } : {}),
    }));
}

type Lookups = {
  action: (name: string) => ActionSnapshot | undefined;
  workflow: (name: string) => WorkflowSpec | undefined;
};

function lookups(state: State, ns: string): Lookups {
  return {
    action: (name) => {
      const a = state.get(R.actions, ns, name) as (KubeObject & { spec: ActionSnapshot['spec'] }) | undefined;
      return a ? { name, spec: a.spec } : undefined;
    },
    workflow: (name) => (state.get(R.workflows, ns, name) as (KubeObject & { spec: WorkflowSpec }) | undefined)?.spec,
  };
}

/** What a WorkflowRun executes besides its own jobs, frozen at start: its Actions (called Workflows bind later). */
export interface Snapshot {
  actions: Record<string, ActionSnapshot>;
}
type Revision = KubeObject & { data?: Snapshot; revision?: number };

/** Largest snapshot accepted (a ControllerRevision is one etcd object). */
export const SNAPSHOT_MAX_BYTES = 1 << 20;

export function takeSnapshot(jobs: JobsSpec, live: Pick<Lookups, 'action'>): Snapshot {
  const actions: Record<string, ActionSnapshot> = {};
  for (const j of Object.values(jobs)) {
    for (const st of j.steps ?? []) {
      const a = st.uses ? live.action(st.uses) : undefined;
      if (st.uses && a) actions[st.uses] = a;
    }
  }
  return { actions };
}

/**
 * The Action lookup from the snapshot (undefined when the WorkflowRun has none: started before
 * snapshots). Called Workflows are always read live: a call binds when it becomes ready.
 */
function frozenActions(state: State, w: Wfr): Lookups['action'] | undefined {
  const name = w.status?.snapshotName;
  const rev: Revision | undefined = name ? state.get(R.controllerRevisions, w.metadata.namespace, name) : undefined;
  if (!rev?.data || rev.metadata.labels?.[LABEL_WORKFLOWRUN_UID] !== w.metadata.uid) return undefined;
  const data = rev.data;
  return (n) => data.actions[n];
}

function snapshotOp(w: Wfr, snap: Snapshot): Operation {
  return {
    op: 'create',
    resource: R.controllerRevisions,
    object: {
      metadata: {
        name: snapshotName(w.metadata.name ?? '', w.metadata.uid ?? ''),
        namespace: w.metadata.namespace,
        labels: { [LABEL_WORKFLOWRUN_UID]: w.metadata.uid ?? '', [WORKFLOWRUN_LABEL]: w.metadata.name ?? '' },
        ownerReferences: [owner(w)],
      },
      revision: 1,
      data: snap,
    },
  };
}

/** The job-local workspace a step Run needs, created before the Run (the admission check requires it to exist). */
function workspaceOp(
  w: Wfr,
  state: State,
  run: { labels: Record<string, string>; spec: { runtime: string; workspace?: { name: string } } },
  spec: JobWorkspaceSpec,
): Operation[] {
  const name = run.spec.workspace?.name;
  if (!name || state.get(R.persistentWorkspaces, w.metadata.namespace, name)) return [];
  const combo = run.labels[LABEL_WORKFLOW_MATRIX];
  const labels: Record<string, string> = {
    [LABEL_WORKFLOWRUN_UID]: w.metadata.uid ?? '',
    [LABEL_WORKFLOW_JOB]: run.labels[LABEL_WORKFLOW_JOB] ?? '',
    ...(combo ? { [LABEL_WORKFLOW_MATRIX]: combo } : {}),
    ...workflowLabels(w, run.labels[LABEL_WORKFLOW_JOB]),
    [CONTROLLER_LABEL]: 'workflowrun-controller',
  };
  const object: KubeObject = {
    metadata: { name, namespace: w.metadata.namespace, ownerReferences: [owner(w)], labels },
    spec: { runtime: run.spec.runtime, ...spec },
  };
  return [{ op: 'create', resource: R.persistentWorkspaces, object }];
}

function initialize(w: Wfr, state: State, now: string): Operation[] {
  const ns = w.metadata.namespace ?? '';
  const live = lookups(state, ns);
  const { action } = live;
  const snap = takeSnapshot(w.spec.jobs, live);
  const size = Buffer.byteLength(JSON.stringify(snap));
  const problem =
    workflowRunProblem(w.spec.jobs, (_job, _step, uses) => !!action(uses)) ??
    (size > SNAPSHOT_MAX_BYTES
      ? `the Actions this run uses are ${size} bytes, more than the ${SNAPSHOT_MAX_BYTES}-byte execution snapshot allows`
      : undefined);
  const gen = w.metadata.generation;
  const status = problem
    ? rejectedStatus(w.status, problem, { now, ...(gen ? { generation: gen } : {}) })
    : initialStatus(w.spec.jobs, {
        now,
        ...(gen ? { generation: gen } : {}),
        snapshotName: snapshotName(w.metadata.name ?? '', w.metadata.uid ?? ''),
        actionSteps: (job, step) => {
          const u = w.spec.jobs[job]?.steps?.find((s) => s.name === step)?.uses;
          return u ? action(u)?.spec.steps.map((s) => s.name) : undefined;
        },
      });
  // The snapshot is created first: status names it only once it exists (a retry finds it AlreadyExists).
  return [
    ...(problem ? [] : [snapshotOp(w, snap)]),
    { op: 'status', resource: R.workflowRuns, object: { ...w, status } },
  ];
}

function cancelJobRuns(state: State, w: Wfr, job: string): Operation[] {
  const ns = w.metadata.namespace ?? '';
  return (
    state.list(R.runs, ns, { [LABEL_WORKFLOWRUN_UID]: w.metadata.uid ?? '', [LABEL_WORKFLOW_JOB]: job }) as RunObj[]
  )
    .filter(
      (r) =>
        !r.spec.cancelRequested && !['Succeeded', 'Failed', 'Timeout', 'Cancelled'].includes(r.status?.phase ?? ''),
    )
    .map((r) => ({
      op: 'patch',
      resource: R.runs,
      namespace: ns,
      name: r.metadata.name ?? '',
      patch: { spec: { cancelRequested: true } },
    }));
}

/** Runs of a job whose workspace was lost are cancelled; the WorkflowRun says why. */
function lostWorkspaces(
  w: Wfr,
  state: State,
  status: WorkflowRunStatus,
  now: string,
): { ops: Operation[]; status: WorkflowRunStatus } {
  const ns = w.metadata.namespace ?? '';
  const ops: Operation[] = [];
  const lost: string[] = [];
  for (const [job, j] of Object.entries(w.spec.jobs)) {
    if (!isInline(j) || ['Succeeded', 'Skipped'].includes(status.jobs?.[job]?.phase ?? '')) continue;
    const ws: WsObj | undefined = state.get(R.persistentWorkspaces, ns, jobWorkspaceName(w.metadata.name ?? '', job));
    if (ws?.status?.phase !== 'Lost') continue;
    lost.push(job);
    ops.push(...cancelJobRuns(state, w, job));
  }
  if (!lost.length) return { ops, status };
  const message = `job${lost.length > 1 ? 's' : ''} ${lost.join(', ')} failed: the controller-owned job workspace was lost with its Runtime Pod`;
  return {
    ops,
    status: {
      ...status,
      conditions: setCondition(
        status.conditions,
        { type: 'WorkspaceLost', status: 'True', reason: 'RuntimePodLost', message },
        now,
      ),
    },
  };
}

export const WAITING_FOR_WORKSPACE = 'WaitingForWorkspace';

/** Child Runs the scheduler keeps Pending because of their workspace (its messages name the PersistentWorkspace). */
function waitingJobs(w: Wfr, state: State): { job: string; message: string }[] {
  const runs = state.list(R.runs, w.metadata.namespace ?? '', { [LABEL_WORKFLOWRUN_UID]: w.metadata.uid ?? '' });
  return (runs as RunObj[])
    .filter(
      (r) =>
        r.spec.workspace &&
        (r.status?.phase ?? 'Pending') === 'Pending' &&
        !r.spec.cancelRequested &&
        (r.status?.message ?? '').includes('PersistentWorkspace'),
    )
    .map((r) => ({ job: r.metadata.labels?.[LABEL_WORKFLOW_JOB] ?? '', message: r.status?.message ?? '' }))
    .sort((a, b) => a.job.localeCompare(b.job));
}

/**
 * Condition WaitingForWorkspace: True while a job's step Run waits for its job workspace (not yet
 * bound, its Runtime Pod unavailable), with the scheduler's message; False once none waits.
 */
function workspaceWaits(w: Wfr, state: State, status: WorkflowRunStatus, now: string): WorkflowRunStatus {
  const waits = ['Succeeded', 'Failed', 'Cancelled'].includes(status.phase ?? '') ? [] : waitingJobs(w, state);
  if (!waits.length && !status.conditions?.some((c) => c.type === WAITING_FOR_WORKSPACE)) return status;
  const first = waits[0];
  const condition = first
    ? {
        type: WAITING_FOR_WORKSPACE,
        status: 'True' as const,
        reason: 'WaitingForWorkspace',
        message: `job "${first.job}" is waiting for workspace: ${first.message}${waits.length > 1 ? ` (and ${waits.length - 1} more)` : ''}`,
      }
    : {
        type: WAITING_FOR_WORKSPACE,
        status: 'False' as const,
        reason: 'WorkspaceAvailable',
        message: 'no job is waiting for its workspace',
      };
  return { ...status, conditions: setCondition(status.conditions, condition, now) };
}

/** Creates the child Runs and WorkflowRuns the reconcile asked for, and cancels the ones it named. */
function childOps(
  w: Wfr,
  state: ReconcileInput['state'],
  res: ReturnType<typeof reconcileStatus>,
  cfg: ControllerConfig,
): Operation[] {
  const ns = w.metadata.namespace ?? '';
  const ops: Operation[] = [];
  for (const c of res.createRuns)
    ops.push(...workspaceOp(w, state, c.run, cfg.jobWorkspace), {
      op: 'create',
      resource: R.runs,
      object: {
        metadata: {
          name: c.run.name,
          namespace: ns,
          labels: { ...c.run.labels, ...workflowLabels(w, c.run.labels[LABEL_WORKFLOW_JOB]) },
          ownerReferences: [owner(w)],
        },
        spec: c.run.spec,
      },
    });
  for (const c of res.createWorkflowRuns)
    ops.push({
      op: 'create',
      resource: R.workflowRuns,
      object: {
        metadata: {
          name: c.workflowRun.name,
          namespace: ns,
          // The child runs the called Workflow: its Runs and workspaces carry that Workflow's name.
          labels: {
            ...c.workflowRun.labels,
            ...labelIf(WORKFLOW_LABEL, w.spec.jobs[c.workflowRun.labels[LABEL_WORKFLOW_JOB] ?? '']?.uses),
          },
          annotations: c.workflowRun.annotations,
          ownerReferences: [owner(w)],
        },
        spec: c.workflowRun.spec,
      },
    });
  for (const c of res.cancel)
    ops.push({
      op: 'patch',
      resource: c.kind === 'Run' ? R.runs : R.workflowRuns,
      namespace: ns,
      name: c.name,
      patch: { spec: { cancelRequested: true } },
    });
  return ops;
}

const ENV_CONFIG: ControllerConfig = { jobWorkspace: jobWorkspaceSpec(process.env) };

export function reconcileWorkflowRun(
  { object, state, now }: ReconcileInput,
  cfg: ControllerConfig = ENV_CONFIG,
): Operation[] {
  const w = object as Wfr | undefined;
  if (!w || w.metadata.deletionTimestamp) return [];
  const nowIso = now.toISOString();
  if (!w.status?.jobs) return w.status?.phase === 'Failed' ? [] : initialize(w, state, nowIso);
  const ns = w.metadata.namespace ?? '';
  const uid = w.metadata.uid ?? '';
  const live = lookups(state, ns);
  const action = frozenActions(state, w) ?? live.action;
  const workflow = live.workflow;
  const res = reconcileStatus({
    workflowRun: {
      name: w.metadata.name ?? '',
      uid,
      ...(w.metadata.generation ? { generation: w.metadata.generation } : {}),
      ...(w.metadata.annotations ? { annotations: w.metadata.annotations } : {}),
    },
    jobs: w.spec.jobs,
    status: w.status,
    runs: runViews(state, ns, uid),
    workflowRuns: workflowRunViews(state, ns, uid),
    cancelRequested: !!w.spec.cancelRequested,
    now: nowIso,
    action: (job, step) => {
      const u = w.spec.jobs[job]?.steps?.find((s) => s.name === step)?.uses;
      return u ? action(u) : undefined;
    },
    workflows: workflow,
    workspace: (job, combination) =>
      isInline(w.spec.jobs[job]) ? jobWorkspaceName(w.metadata.name ?? '', job, combination) : undefined,
  });
  const ops = childOps(w, state, res, cfg);
  const lost = lostWorkspaces(w, state, res.status, nowIso);
  ops.push(...lost.ops);
  const status = workspaceWaits(w, state, lost.status, nowIso);
  if (!sameJson(status, w.status)) ops.push({ op: 'status', resource: R.workflowRuns, object: { ...w, status } });
  if (res.requeueAfterMs !== undefined) ops.push({ op: 'requeue', afterMs: res.requeueAfterMs });
  return ops;
}

const parent = (o: KubeObject): string[] => {
  const c = o.metadata.ownerReferences?.find((r) => r.controller && r.kind === 'WorkflowRun');
  return c ? [`${o.metadata.namespace}/${c.name}`] : [];
};

const fn: FunctionDef = {
  name: 'workflowrun-controller',
  description: 'Executes WorkflowRuns: jobs, steps as child Runs, outputs, artifacts, job-local workspaces, calls.',
  trigger: {
    type: 'watch',
    resource: R.workflowRuns,
    also: [
      { resource: R.runs, labelSelector: LABEL_WORKFLOWRUN_UID, map: parent },
      { resource: R.workflowRuns, labelSelector: LABEL_WORKFLOWRUN_UID, map: parent },
      {
        resource: R.persistentWorkspaces,
        labelSelector: LABEL_WORKFLOWRUN_UID,
        map: parent,
        // Not on a job workspace's lastUsedTime alone (twice per step boundary, on this very key).
        filter: (e) => !usageOnly(e),
      },
      { resource: R.controllerRevisions, labelSelector: LABEL_WORKFLOWRUN_UID, map: parent },
      { resource: R.actions, map: () => [] },
      { resource: R.workflows, map: () => [] },
    ],
  },
  concurrency: 4,
  rbac: [
    { apiGroups: ['kruntimes.io'], resources: ['workflowruns'], verbs: ['get', 'list', 'watch', 'create', 'patch'] },
    { apiGroups: ['kruntimes.io'], resources: ['workflowruns/status'], verbs: ['get', 'update', 'patch'] },
    { apiGroups: ['kruntimes.io'], resources: ['runs'], verbs: ['get', 'list', 'watch', 'create', 'patch'] },
    { apiGroups: ['kruntimes.io'], resources: ['persistentworkspaces'], verbs: ['get', 'list', 'watch', 'create'] },
    { apiGroups: ['kruntimes.io'], resources: ['actions', 'workflows'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: ['apps'], resources: ['controllerrevisions'], verbs: ['get', 'list', 'watch', 'create'] },
  ],
  handler: (input: ReconcileInput) => reconcileWorkflowRun(input),
};
export default fn;
