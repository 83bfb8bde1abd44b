/**
 * Pure Kubernetes adapter: Ensure (create the batch/v1 Job once the class is Ready, the frozen
 * class/parameters UIDs still match and the ServiceAccount exists), Observe (map the batch Job
 * conditions to Succeeded/Failed), Cancel (suspend the batch Job, which terminates its Pods;
 * Failed/Cancelled once no Pod is active) and Delete (owner-reference garbage collection).
 * Observe and Cancel never depend on the class being Ready or even existing: the execution
 * reference in status takes precedence. A recorded execution that disappears is ResultUnknown,
 * never re-created.
 */
import { R } from '../../lib/fn/resources.ts';
import type { Operation, State } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import {
  GROUP,
  KUBERNETES_CONTROLLER,
  X,
  type ExecutionRef,
  type Job,
  type JobClass,
  type KubernetesParameters,
} from '../../lib/jobclass/api.ts';
import { isTrue, type ConditionInput } from '../../lib/jobclass/events.ts';
import { finish, isAccepted, isFinished, statusOps, updateStatus } from '../../lib/jobclass/jobs.ts';
import { classGate, frozenParametersProblem, type Problem } from '../../lib/jobclass/resolve.ts';
import { batchJobName, renderBatchJob } from './render.ts';

export const COMPONENT = 'jobclass-kubernetes';

interface BatchJob extends KubeObject {
  spec?: { suspend?: boolean };
  status?: {
    active?: number;
    ready?: number;
    startTime?: string;
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
  };
}

const ownedBy = (o: KubeObject, job: Job): boolean =>
  (o.metadata.ownerReferences ?? []).some(
    (r) => r.uid === job.metadata.uid && r.kind === 'Job' && r.apiVersion.startsWith(`${GROUP}/`),
  );
const batchCondition = (bj: BatchJob, type: string): { reason?: string; message?: string } | undefined =>
  bj.status?.conditions?.find((c) => c.type === type && c.status === 'True');

export const isKubernetesJob = (j: Job): boolean =>
  j.status?.resolvedJobClass?.controllerName === KUBERNETES_CONTROLLER;

const scheduledFalse = (p: Problem): ConditionInput => ({
  type: 'Scheduled',
  status: 'False',
  reason: p.reason,
  message: p.message,
});

function unknown(job: Job, reason: string, message: string, now: Date): Operation[] {
  return statusOps(
    job,
    updateStatus(job, [{ type: 'ResultUnknown', status: 'True', reason, message }], now, {}, false),
    now,
    COMPONENT,
  );
}

/** Why a new execution cannot be created now (the Job stays Accepted, Scheduled=False). */
export function preflight(job: Job, state: State): { problem: Problem } | { params: KubernetesParameters } {
  const frozen = job.status!.resolvedJobClass!;
  const cls = state.get(X.jobClasses, undefined, frozen.name) as JobClass | undefined;
  const gate = classGate(frozen, cls);
  if (gate) return { problem: gate };
  const params = state.get(X.kubernetesParameters, undefined, frozen.parametersRef.name) as
    KubernetesParameters | undefined;
  const pp = frozenParametersProblem(frozen, params);
  if (pp) return { problem: pp };
  const sa = params!.spec.serviceAccountName;
  if (!state.get(R.serviceAccounts, job.metadata.namespace, sa)) {
    return {
      problem: {
        reason: 'ServiceAccountNotFound',
        message: `ServiceAccount ${job.metadata.namespace ?? ''}/${sa} does not exist; it must be provisioned in every allowed namespace (the default ServiceAccount is never used)`,
      },
    };
  }
  return { params: params! };
}

function ensure(job: Job, state: State, now: Date): Operation[] {
  if (job.spec.cancelRequested)
    return statusOps(
      job,
      finish(
        job,
        'Failed',
        { reason: 'Cancelled', message: 'cancelled before an execution was created; nothing ran' },
        now,
      ),
      now,
      COMPONENT,
    );
  const pf = preflight(job, state);
  if ('problem' in pf) return statusOps(job, updateStatus(job, [scheduledFalse(pf.problem)], now), now, COMPONENT);
  const object = renderBatchJob(job, pf.params);
  const execution: ExecutionRef = {
    controllerName: KUBERNETES_CONTROLLER,
    apiVersion: 'batch/v1',
    kind: 'Job',
    name: batchJobName(job),
  };
  const status = updateStatus(
    job,
    [
      {
        type: 'Scheduled',
        status: 'True',
        reason: 'ExecutionCreated',
        message: `created batch/v1 Job ${execution.name ?? ''}`,
      },
    ],
    now,
    { execution },
  );
  return [{ op: 'create', resource: X.batchJobs, object }, ...statusOps(job, status, now, COMPONENT)];
}

function cancel(job: Job, bj: BatchJob, exec: ExecutionRef, now: Date): Operation[] {
  if (!bj.spec?.suspend) {
    const status = updateStatus(job, [], now, {
      execution: { ...exec, cancelIssuedAt: exec.cancelIssuedAt ?? now.toISOString() },
      message: 'cancelling: the batch Job is suspended and its Pods are terminated',
    });
    return [
      {
        op: 'patch',
        resource: X.batchJobs,
        namespace: bj.metadata.namespace ?? '',
        name: bj.metadata.name ?? '',
        patch: { spec: { suspend: true } },
      },
      ...statusOps(job, status, now, COMPONENT),
    ];
  }
  if ((bj.status?.active ?? 0) > 0)
    return statusOps(
      job,
      updateStatus(job, [], now, {
        execution: exec,
        message: `cancelling: waiting for ${bj.status?.active ?? 0} Pod(s) to terminate`,
      }),
      now,
      COMPONENT,
    );
  return statusOps(
    job,
    finish(
      job,
      'Failed',
      { reason: 'Cancelled', message: 'cancelled; the batch Job was suspended and no Pod is active' },
      now,
      { execution: exec },
    ),
    now,
    COMPONENT,
  );
}

/** Succeeded/Failed when the batch Job finished, else undefined. */
function finished(job: Job, bj: BatchJob, exec: ExecutionRef, now: Date): Operation[] | undefined {
  const start = bj.status?.startTime ? { startTime: job.status?.startTime ?? bj.status.startTime } : {};
  const complete = batchCondition(bj, 'Complete');
  if (complete)
    return statusOps(
      job,
      finish(job, 'Succeeded', { reason: 'Completed', message: complete.message || 'the batch Job completed' }, now, {
        execution: exec,
        ...start,
      }),
      now,
      COMPONENT,
    );
  const failed = batchCondition(bj, 'Failed');
  if (!failed) return undefined;
  const reason = failed.reason === 'DeadlineExceeded' ? 'DeadlineExceeded' : 'ExecutionFailed';
  return statusOps(
    job,
    finish(
      job,
      'Failed',
      { reason, message: `${failed.reason ?? 'Failed'}: ${failed.message ?? 'the batch Job failed'}` },
      now,
      { execution: exec, ...start },
    ),
    now,
    COMPONENT,
  );
}

/** Maps the observed batch Job to the Job status. */
export function observe(job: Job, bj: BatchJob, now: Date): Operation[] {
  const exec: ExecutionRef = {
    ...(job.status?.execution ?? { controllerName: KUBERNETES_CONTROLLER }),
    apiVersion: 'batch/v1',
    kind: 'Job',
    name: bj.metadata.name ?? '',
    uid: bj.metadata.uid ?? '',
  };
  const done = finished(job, bj, exec, now);
  if (done) return done;
  if (job.spec.cancelRequested) return cancel(job, bj, exec, now);
  const updates: ConditionInput[] = [
    { type: 'Scheduled', status: 'True', reason: 'ExecutionCreated', message: `batch/v1 Job ${exec.name ?? ''}` },
  ];
  if (isTrue(job.status?.conditions, 'ResultUnknown'))
    updates.push({
      type: 'ResultUnknown',
      status: 'False',
      reason: 'ExecutionObserved',
      message: 'the batch Job is observable again',
    });
  const running = (bj.status?.active ?? 0) > 0 || (bj.status?.ready ?? 0) > 0;
  const start = bj.status?.startTime ? { startTime: job.status?.startTime ?? bj.status.startTime } : {};
  return statusOps(job, updateStatus(job, updates, now, { execution: exec, ...start }, running), now, COMPONENT);
}

/** All operations for one Job of a Kubernetes class. */
export function reconcileKubernetesJob(job: Job | undefined, state: State, now: Date): Operation[] {
  if (
    !job ||
    job.metadata.deletionTimestamp ||
    !isAccepted(job.status) ||
    !isKubernetesJob(job) ||
    isFinished(job.status)
  )
    return [];
  const exec = job.status?.execution;
  const name = exec?.name ?? batchJobName(job);
  const bj = state.get(X.batchJobs, job.metadata.namespace, name);
  if (exec?.name) {
    if (!bj)
      return unknown(
        job,
        'ExecutionNotFound',
        `batch/v1 Job ${name} disappeared; its result cannot be observed and it is not re-created`,
        now,
      );
    if (!ownedBy(bj, job) || (exec.uid && bj.metadata.uid !== exec.uid))
      return unknown(
        job,
        'ExecutionReplaced',
        `batch/v1 Job ${name} is not the execution this Job created (uid ${exec.uid ?? '?'})`,
        now,
      );
    return observe(job, bj, now);
  }
  if (bj) {
    if (!ownedBy(bj, job))
      return statusOps(
        job,
        updateStatus(
          job,
          [
            scheduledFalse({
              reason: 'ExecutionNameConflict',
              message: `batch/v1 Job ${name} exists and is not owned by this Job`,
            }),
          ],
          now,
        ),
        now,
        COMPONENT,
      );
    return observe(job, bj, now);
  }
  return ensure(job, state, now);
}

/** Unscheduled Jobs of Kubernetes classes that a dependency change (namespace ServiceAccounts, class Ready) may unblock. */
export function waitingJobs(state: State, filter: (j: Job) => boolean): Job[] {
  return (state.list(X.jobs) as Job[]).filter(
    (j) => isKubernetesJob(j) && isAccepted(j.status) && !isFinished(j.status) && !j.status?.execution && filter(j),
  );
}
