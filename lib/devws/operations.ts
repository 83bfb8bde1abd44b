/**
 * The durable operation state machine (seed 002 "持久操作"): states, the step list of each kind,
 * one unfinished operation per Project, claim, advance, deferral, blocking and explicit retry.
 * Every function returns a new status; none mutates its input. Time is injected.
 */
import {
  DevwsError,
  type Operation,
  type OperationKind,
  type OperationState,
  type OperationStatus,
  type Step,
} from './api.ts';

/** The step list of each operation kind, exactly as the seed's table. */
export const STEPS: Record<OperationKind, Step[]> = {
  create_project: ['sandbox', 'node', 'clone', 'plugin', 'done'],
  create_workspace: ['sandbox', 'node', 'clone', 'plugin', 'done'],
  start: ['sandbox', 'node', 'plugin', 'done'],
  restart: ['quiesce', 'terminate', 'sandbox', 'node', 'plugin', 'done'],
  stop: ['quiesce', 'terminate', 'done'],
  delete_workspace: ['quiesce', 'terminate', 'cleanup', 'done'],
  delete_project: ['quiesce', 'terminate', 'cleanup', 'done'],
  install_plugin: ['plugin', 'done'],
  remove_plugin: ['plugin', 'done'],
};

const UNFINISHED: OperationState[] = ['queued', 'running', 'retry_wait', 'blocked'];

/** The steps an operation goes through: the plugin step is skipped when there is nothing to do. */
export function stepsFor(kind: OperationKind, hasPlugins: boolean): Step[] {
  return STEPS[kind].filter((s) => hasPlugins || s !== 'plugin');
}

export function isUnfinished(op: Operation): boolean {
  return UNFINISHED.includes(op.status?.state ?? 'queued');
}

/** The initial status of a new operation (the API returns it at once: seed's 202). */
export function initialStatus(kind: OperationKind, hasPlugins: boolean): OperationStatus {
  const steps = stepsFor(kind, hasPlugins);
  return { state: 'queued', step: steps[0], steps };
}

/** At most one unfinished operation per Project (409 operation_in_progress). */
export function assertNoOperationInProgress(project: string, ops: Operation[], except?: string): void {
  const busy = ops.find((o) => o.spec.project === project && o.metadata.name !== except && isUnfinished(o));
  if (busy) {
    throw new DevwsError(
      'operation_in_progress',
      409,
      `Project ${project} has an unfinished operation ${busy.metadata.name ?? ''} (${busy.spec.kind}, ${busy.status?.state ?? 'queued'})`,
    );
  }
}

/** Of several unfinished operations of a Project, only the oldest may run (closes the admission race). */
export function oldestUnfinished(project: string, ops: Operation[]): Operation | undefined {
  return ops
    .filter((o) => o.spec.project === project && isUnfinished(o))
    .sort(
      (a, b) =>
        (a.metadata.creationTimestamp ?? '').localeCompare(b.metadata.creationTimestamp ?? '') ||
        (a.metadata.name ?? '').localeCompare(b.metadata.name ?? ''),
    )[0];
}

/** Claim: queued, or retry_wait whose retryAt has passed, becomes running; otherwise undefined. */
export function claim(s: OperationStatus, now: Date): OperationStatus | undefined {
  if (s.state === 'queued') return { ...s, state: 'running', retryAt: undefined };
  if (s.state === 'retry_wait' && Date.parse(s.retryAt ?? '') <= now.getTime()) {
    return { ...s, state: 'running', retryAt: undefined };
  }
  return undefined;
}

/**
 * The current step is proven: move to the next; past the last real step the operation succeeds,
 * except when it ends with the Workspace ready (holdAtDone): then it waits on step done for the
 * commit point (lifecycle.commitReady) that makes both true together.
 */
export function advance(s: OperationStatus, holdAtDone = false): OperationStatus {
  const steps = s.steps ?? [];
  const current = s.step ?? steps[0] ?? 'done';
  const next = steps[steps.indexOf(current) + 1] ?? 'done';
  if (next === 'done' && holdAtDone) return { ...s, step: 'done', reason: undefined, message: undefined };
  if (next === 'done') return { ...s, step: 'done', state: 'succeeded', reason: undefined, message: undefined };
  return { ...s, step: next, reason: undefined, message: undefined };
}

export function deferRetry(
  s: OperationStatus,
  reason: string,
  now: Date,
  delayMs: number,
  message?: string,
): OperationStatus {
  return { ...s, state: 'retry_wait', reason, message, retryAt: new Date(now.getTime() + delayMs).toISOString() };
}

export function block(s: OperationStatus, reason: string, message?: string): OperationStatus {
  return { ...s, state: 'blocked', reason, message, retryAt: undefined };
}

export function fail(s: OperationStatus, reason: string, message?: string): OperationStatus {
  return { ...s, state: 'failed', reason, message, retryAt: undefined };
}

/**
 * Explicit retry (the seed's POST /operations/:oid/retry): only a blocked or retry_wait operation,
 * which becomes queued on the same step; nothing else of it changes (frozen clone input, effects,
 * clone attempts). Otherwise 409 operation_not_retryable.
 */
export function explicitRetry(s: OperationStatus): OperationStatus {
  if (s.state !== 'blocked' && s.state !== 'retry_wait') {
    throw new DevwsError(
      'operation_not_retryable',
      409,
      `an operation in state ${s.state ?? 'queued'} cannot be retried`,
    );
  }
  return { ...s, state: 'queued', retryAt: undefined, cloneUnknown: undefined };
}
