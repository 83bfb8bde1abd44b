/**
 * Pure Job acceptance (seed "Condition 与 Job 状态机交互"): a Job becomes Accepted=True only when
 * its class is resolved (explicit, namespace default, single global default), the class UID
 * still matches the frozen reference, the class is Accepted, the namespace is allowed, the
 * resources resolve within policy and every required Secret/ConfigMap reference resolves. The
 * resolved class and the effective resources are written once and never changed; after
 * acceptance the adapter of the class owns the Job. Finished Jobs are deleted after their TTL.
 */
import type { Operation, State } from '../../lib/fn/types.ts';
import {
  X,
  type Job,
  type JobClass,
  type Namespace,
  type Parameters,
  type Requirements,
  type ResolvedJobClass,
} from '../../lib/jobclass/api.ts';
import { controllerJobProblem, parametersOf } from '../../lib/jobclass/controllers.ts';
import { referenceProblem } from '../../lib/jobclass/envrefs.ts';
import { isTrue, conditionOf, type ConditionInput } from '../../lib/jobclass/events.ts';
import { finish, isAccepted, isFinished, statusOps, updateStatus } from '../../lib/jobclass/jobs.ts';
import {
  freeze,
  frozenClassProblem,
  frozenParametersProblem,
  namespaceAllowed,
  resolveClass,
  type Problem,
} from '../../lib/jobclass/resolve.ts';
import { resolveResources } from '../../lib/jobclass/resources.ts';

export const COMPONENT = 'jobclass-jobs';
/** A Job waiting for a Secret re-checks this often (Secrets are read by name, not watched). */
export const SECRET_RECHECK_MS = 10_000;
const SECRET_WAITS = new Set([
  'SecretNotFound',
  'SecretKeyNotFound',
  'ImagePullSecretNotFound',
  'ConfigMapNotFound',
  'ConfigMapKeyNotFound',
]);

export interface Outcome {
  accepted: ConditionInput;
  resolved?: ResolvedJobClass;
  effective?: Requirements;
}

const no = (p: Problem, resolved?: ResolvedJobClass): Outcome => ({
  accepted: { type: 'Accepted', status: 'False', reason: p.reason, message: p.message },
  ...(resolved ? { resolved } : {}),
});

/** The class the Job uses: the frozen one, or a fresh resolution. */
function classFor(job: Job, ns: Namespace | undefined, state: State): { cls: JobClass } | { problem: Problem } {
  const frozen = job.status?.resolvedJobClass;
  if (frozen) {
    const cls = state.get(X.jobClasses, undefined, frozen.name) as JobClass | undefined;
    const p = frozenClassProblem(frozen, cls);
    return p ? { problem: p } : { cls: cls! };
  }
  const r = resolveClass(job.spec.jobClassName, ns, state.list(X.jobClasses) as JobClass[]);
  switch (r.kind) {
    case 'resolved':
      return { cls: r.cls };
    case 'none':
      return {
        problem: {
          reason: 'NoDefaultJobClass',
          message:
            'spec.jobClassName is not set, the namespace names no default class and no JobClass is annotated execution.ayatori.ddupan.top/is-default-job-class: "true"',
        },
      };
    case 'ambiguous':
      return {
        problem: {
          reason: 'AmbiguousDefaultJobClass',
          message: `several JobClasses are global defaults (${r.names.join(', ')}); set spec.jobClassName or keep a single default (no newest-wins rule)`,
        },
      };
    case 'notFound':
      return {
        problem: {
          reason: 'JobClassNotFound',
          message:
            r.via === 'explicit'
              ? `JobClass ${r.name} does not exist`
              : `JobClass ${r.name} named by the namespace annotation does not exist`,
        },
      };
  }
}

/** The resolved reference: the frozen one (with the parameters UID filled in once known) or a new freeze. */
function resolvedRef(job: Job, cls: JobClass, params: Parameters | undefined): ResolvedJobClass {
  const frozen = job.status?.resolvedJobClass;
  if (!frozen) return freeze(cls, params);
  if (frozen.parametersRef.uid || !params?.metadata.uid) return frozen;
  return { ...frozen, parametersRef: { ...frozen.parametersRef, uid: params.metadata.uid } };
}

function classProblem(cls: JobClass, ns: Namespace | undefined): Problem | undefined {
  if (cls.metadata.deletionTimestamp)
    return {
      reason: 'JobClassTerminating',
      message: `JobClass ${cls.metadata.name ?? ''} is being deleted and takes no new Jobs`,
    };
  const c = conditionOf(cls.status?.conditions, 'Accepted');
  if (!isTrue(cls.status?.conditions, 'Accepted')) {
    return {
      reason: 'JobClassNotAccepted',
      message: `JobClass ${cls.metadata.name ?? ''} is not accepted${c ? ` (${c.reason}: ${c.message})` : ' yet'}`,
    };
  }
  if (
    c?.observedGeneration !== undefined &&
    cls.metadata.generation !== undefined &&
    c.observedGeneration !== cls.metadata.generation
  ) {
    return {
      reason: 'JobClassNotAccepted',
      message: `JobClass ${cls.metadata.name ?? ''} generation ${cls.metadata.generation} is not evaluated yet`,
    };
  }
  if (!namespaceAllowed(cls, ns))
    return {
      reason: 'NamespaceNotAllowed',
      message: `namespace ${ns?.metadata.name ?? '?'} does not match spec.allowedNamespaces of JobClass ${cls.metadata.name ?? ''}`,
    };
  return undefined;
}

/** Evaluates acceptance for a Job that is not accepted yet. */
export function evaluate(job: Job, state: State): Outcome {
  const ns = state.get(X.namespaces, undefined, job.metadata.namespace ?? '');
  const found = classFor(job, ns, state);
  if ('problem' in found) return no(found.problem, job.status?.resolvedJobClass);
  const { cls } = found;
  const params = parametersOf(cls, state);
  const resolved = resolvedRef(job, cls, params);
  const pp = resolved.parametersRef.uid ? frozenParametersProblem(resolved, params) : undefined;
  const early = pp ?? classProblem(cls, ns);
  if (early) return no(early, resolved);
  const res = resolveResources(job.spec.resources, cls.spec.resources);
  if (!res.ok) return no({ reason: res.reason, message: res.message }, resolved);
  const late =
    referenceProblem(job, state) ?? controllerJobProblem(cls.spec.controllerName, job, params, res.effective);
  if (late) return no(late, resolved);
  return {
    accepted: {
      type: 'Accepted',
      status: 'True',
      reason: 'Accepted',
      message: `accepted for JobClass ${cls.metadata.name ?? ''} (${cls.spec.controllerName})`,
    },
    resolved,
    effective: res.effective,
  };
}

function ttlOps(job: Job, now: Date): Operation[] {
  const ttl = job.spec.ttlSecondsAfterFinished;
  const done = job.status?.completionTime;
  if (ttl === undefined || !done) return [];
  const at = Date.parse(done) + ttl * 1000;
  if (at > now.getTime()) return [{ op: 'requeue', afterMs: at - now.getTime() }];
  return [
    {
      op: 'delete',
      resource: X.jobs,
      namespace: job.metadata.namespace ?? '',
      name: job.metadata.name ?? '',
      uid: job.metadata.uid ?? '',
    },
  ];
}

/** All operations for one Job. */
export function reconcileJob(job: Job | undefined, state: State, now: Date): Operation[] {
  if (!job || job.metadata.deletionTimestamp) return [];
  if (isFinished(job.status)) return ttlOps(job, now);
  if (isAccepted(job.status)) return [];
  if (job.spec.cancelRequested)
    return statusOps(
      job,
      finish(job, 'Failed', { reason: 'Cancelled', message: 'cancelled before it was accepted; nothing ran' }, now),
      now,
      COMPONENT,
    );
  const o = evaluate(job, state);
  const extra = {
    ...(o.resolved ? { resolvedJobClass: o.resolved } : {}),
    ...(o.effective ? { effectiveResources: o.effective } : {}),
  };
  const ops = statusOps(job, updateStatus(job, [o.accepted], now, extra), now, COMPONENT);
  return SECRET_WAITS.has(o.accepted.reason) ? [...ops, { op: 'requeue', afterMs: SECRET_RECHECK_MS }] : ops;
}

/** Jobs an invocation for a dependency key re-evaluates: every not yet accepted, unfinished Job (optionally of one namespace). */
export function pendingJobs(state: State, namespace?: string): Job[] {
  return (state.list(X.jobs, namespace) as Job[]).filter(
    (j) => !j.metadata.deletionTimestamp && !isFinished(j.status) && !isAccepted(j.status),
  );
}
