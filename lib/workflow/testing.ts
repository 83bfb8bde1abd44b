/**
 * Test fixtures for the workflow cores (used only by *.test.ts): a tiny in-memory world that
 * applies reconcileStatus results (creates children, records cancel requests) and lets a
 * script decide how each child Run ends.
 */
import type { Run } from '../api/generated/kruntimes.ts';
import {
  initialStatus,
  reconcileStatus,
  type ActionSnapshot,
  type ArtifactRef,
  type ChildRunView,
  type ChildWorkflowRunView,
  type JobsSpec,
  type ReconcileResult,
  type StepRef,
  type WorkflowRunStatus,
  type WorkflowSpec,
} from './core.ts';

export const T0 = Date.parse('2026-07-06T12:00:00Z');
export const iso = (ms: number): string => new Date(ms).toISOString();

export function artifact(name: string, path = `runs/u/artifacts/${name}`): ArtifactRef {
  return {
    name,
    driver: 'filesystem',
    type: 'file',
    location: { filesystem: { path } },
    sizeBytes: 1,
    createdAt: iso(T0),
  };
}

/** How a child Run ends; 'hang' keeps it running. */
export type RunScript = (
  ref: StepRef,
  spec: Run['spec'],
) => { phase: string; outputs?: Record<string, string>; artifactRefs?: ArtifactRef[]; message?: string } | 'hang';

export interface WorldRun extends ChildRunView {
  spec: Run['spec'];
}

export interface World {
  jobs: JobsSpec;
  status: WorkflowRunStatus;
  runs: Map<string, WorldRun>;
  workflowRuns: Map<string, ChildWorkflowRunView & { spec: { jobs: JobsSpec } }>;
  now: number;
  cancelRequested: boolean;
  actions: Record<string, ActionSnapshot>;
  workflows: Record<string, WorkflowSpec>;
  results: ReconcileResult[];
}

export function world(jobs: JobsSpec, over: Partial<Pick<World, 'actions' | 'workflows'>> = {}): World {
  const actions = over.actions ?? {};
  const status = initialStatus(jobs, {
    now: iso(T0),
    generation: 1,
    snapshotName: 'wf-snapshot',
    actionSteps: (job, step) => actions[`${job}/${step}`]?.spec.steps.map((s) => s.name),
  });
  return {
    jobs,
    status,
    runs: new Map(),
    workflowRuns: new Map(),
    now: T0,
    cancelRequested: false,
    actions,
    workflows: over.workflows ?? {},
    results: [],
  };
}

/** One reconcile + apply: creates children (as Pending), records cancellation requests. */
export function reconcile(w: World): ReconcileResult {
  const r = reconcileStatus({
    workflowRun: { name: 'wf', uid: 'uid-wf', generation: 1 },
    jobs: w.jobs,
    status: w.status,
    runs: [...w.runs.values()],
    workflowRuns: [...w.workflowRuns.values()],
    cancelRequested: w.cancelRequested,
    now: iso(w.now),
    action: (job, step) => w.actions[`${job}/${step}`],
    workflows: (n) => w.workflows[n],
  });
  w.status = r.status;
  for (const c of r.createRuns)
    if (!w.runs.has(c.run.name))
      w.runs.set(c.run.name, { name: c.run.name, ref: c.ref, phase: 'Pending', spec: c.run.spec });
  for (const c of r.createWorkflowRuns) {
    if (!w.workflowRuns.has(c.workflowRun.name)) {
      w.workflowRuns.set(c.workflowRun.name, {
        name: c.workflowRun.name,
        job: c.job,
        ...(c.combination ? { combination: c.combination } : {}),
        phase: 'Pending',
        annotations: c.workflowRun.annotations,
        spec: c.workflowRun.spec,
      });
    }
  }
  for (const c of r.cancel) {
    const run = w.runs.get(c.name);
    if (c.kind === 'Run' && run) run.cancelRequested = true;
    const wr = w.workflowRuns.get(c.name);
    if (c.kind === 'WorkflowRun' && wr) wr.cancelRequested = true;
  }
  w.results.push(r);
  return r;
}

/** Ends every non-terminal child Run according to the script (cancel requests win). */
export function finishRuns(w: World, script: RunScript): void {
  for (const run of w.runs.values()) {
    if (['Succeeded', 'Failed', 'Timeout', 'Cancelled'].includes(run.phase ?? '')) continue;
    if (run.cancelRequested) {
      Object.assign(run, { phase: 'Cancelled', completionTime: iso(w.now), message: 'cancelled' });
      continue;
    }
    const end = script(run.ref, run.spec);
    if (end === 'hang') {
      Object.assign(run, { phase: 'Running', startTime: run.startTime ?? iso(w.now) });
      continue;
    }
    Object.assign(run, { startTime: run.startTime ?? iso(w.now), completionTime: iso(w.now) }, end);
  }
}

/** Reconcile/finish until the WorkflowRun is terminal (or the step budget runs out). */
export function runToEnd(w: World, script: RunScript, maxRounds = 50): WorkflowRunStatus {
  for (let i = 0; i < maxRounds; i++) {
    reconcile(w);
    if (['Succeeded', 'Failed', 'Cancelled'].includes(w.status.phase)) return w.status;
    finishRuns(w, script);
    w.now += 1000;
  }
  return w.status;
}

export const succeed: RunScript = () => ({ phase: 'Succeeded' });
