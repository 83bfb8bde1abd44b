/** Run phases and the status transitions every writer uses (exact upstream reasons and messages). */
import { setCondition, type Condition } from './conditions.ts';

export const TERMINAL = new Set(['Succeeded', 'Failed', 'Timeout', 'Cancelled']);
export const ACTIVE = new Set(['Scheduled', 'Running', 'Ready']);
export const isTerminal = (phase: string | undefined): boolean => TERMINAL.has(phase ?? '');

export interface RunStatus {
  phase?: string;
  assignedPod?: string;
  assignedPodUID?: string;
  message?: string;
  startTime?: string;
  completionTime?: string;
  outputs?: Record<string, string>;
  artifactRefs?: unknown[];
  artifactStore?: unknown;
  attempt?: number;
  conditions?: Condition[];
  /** The invoke endpoint of a Ready function Run; null removes it (merge patch). */
  endpoint?: FunctionEndpoint | null;
}

export interface FunctionEndpoint {
  protocol: 'HTTPS';
  url: string;
  /** base64 of the PEM trust bundle of the endpoint's certificate. */
  caBundle?: string;
}

/** Phase for a terminal failure reason. */
export function phaseFor(reason: string): 'Failed' | 'Timeout' | 'Cancelled' {
  if (reason === 'Timeout' || reason === 'IdleTimeout') return 'Timeout';
  if (reason === 'Cancelled') return 'Cancelled';
  return 'Failed';
}

/** Bounds a message to 1024 bytes, UTF-8 safe, marking the cut with "...". */
export function boundMessage(msg: string, max = 1024): string {
  if (Buffer.byteLength(msg) <= max) return msg;
  let out = msg;
  while (Buffer.byteLength(out) > max - 3) out = out.slice(0, -1);
  return `${out}...`;
}

export function claimed(s: RunStatus, now: string, gen?: number): RunStatus {
  return {
    ...s,
    phase: 'Running',
    startTime: s.startTime ?? now,
    attempt: s.attempt && s.attempt > 0 ? s.attempt : 1,
    conditions: setCondition(
      s.conditions,
      {
        type: 'Running',
        status: 'True',
        reason: 'Claimed',
        message: 'claimed by runtimed',
        ...(gen ? { observedGeneration: gen } : {}),
      },
      now,
    ),
  };
}

export function succeeded(
  s: RunStatus,
  now: string,
  outputs: Record<string, string> | undefined,
  artifactRefs: unknown[] | undefined,
): RunStatus {
  let conditions = setCondition(
    s.conditions,
    { type: 'Running', status: 'False', reason: 'Completed', message: '' },
    now,
  );
  conditions = setCondition(
    conditions,
    { type: 'Completed', status: 'True', reason: 'RunCompleted', message: 'Completed successfully' },
    now,
  );
  return {
    ...s,
    phase: 'Succeeded',
    message: 'execution completed',
    completionTime: now,
    attempt: s.attempt && s.attempt > 0 ? s.attempt : 1,
    ...(outputs ? { outputs } : {}),
    ...(artifactRefs?.length ? { artifactRefs } : {}),
    conditions,
  };
}

export function terminalFailure(s: RunStatus, now: string, reason: string, message: string): RunStatus {
  const msg = boundMessage(message);
  let conditions = setCondition(s.conditions, { type: 'Running', status: 'False', reason, message: msg }, now);
  conditions = setCondition(conditions, { type: 'Completed', status: 'False', reason, message: msg }, now);
  return { ...s, phase: phaseFor(reason), message: msg, completionTime: now, conditions };
}

/** In-place retry scheduled on the same Pod: still Running, next attempt, Running=False/<reason>. */
export function retryScheduled(s: RunStatus, now: string, reason: string, message: string): RunStatus {
  return {
    ...s,
    phase: 'Running',
    attempt: (s.attempt && s.attempt > 0 ? s.attempt : 1) + 1,
    message: boundMessage(message),
    conditions: setCondition(
      s.conditions,
      { type: 'Running', status: 'False', reason, message: boundMessage(message) },
      now,
    ),
  };
}

export function retryStarted(s: RunStatus, now: string): RunStatus {
  return {
    ...s,
    conditions: setCondition(
      s.conditions,
      { type: 'Running', status: 'True', reason: 'Retrying', message: 'Retry after failure' },
      now,
    ),
  };
}

/** A session Run is staged and accepts operations: phase Ready, Ready=True (seed 004 "Ready Session Run"). */
export function sessionReady(s: RunStatus, now: string, gen?: number): RunStatus {
  return {
    ...s,
    phase: 'Ready',
    message: 'session is ready for operations',
    startTime: s.startTime ?? now,
    attempt: s.attempt && s.attempt > 0 ? s.attempt : 1,
    conditions: setCondition(
      s.conditions,
      {
        type: 'Ready',
        status: 'True',
        reason: 'SessionReady',
        message: 'session is ready for operations',
        ...(gen ? { observedGeneration: gen } : {}),
      },
      now,
    ),
  };
}

/** A session's end, Ready=False: idle (SessionIdle) is Succeeded, anything else the terminal phase of its reason. */
export function sessionEnded(s: RunStatus, now: string, reason: string, message: string): RunStatus {
  if (reason !== 'SessionIdle') {
    const failed = terminalFailure(s, now, reason, message);
    return {
      ...failed,
      conditions: setCondition(
        failed.conditions,
        { type: 'Ready', status: 'False', reason, message: failed.message ?? message },
        now,
      ),
    };
  }
  let conditions = setCondition(s.conditions, { type: 'Ready', status: 'False', reason, message }, now);
  conditions = setCondition(conditions, { type: 'Completed', status: 'True', reason, message }, now);
  return { ...s, phase: 'Succeeded', message, completionTime: now, conditions };
}

/** A function Run's handler is registered and callable: phase Ready, Ready=True/FunctionRegistered, the endpoint set. */
export function functionReady(s: RunStatus, now: string, endpoint: FunctionEndpoint, gen?: number): RunStatus {
  return {
    ...s,
    phase: 'Ready',
    message: 'function is registered and ready for calls',
    startTime: s.startTime ?? now,
    attempt: s.attempt && s.attempt > 0 ? s.attempt : 1,
    endpoint,
    conditions: setCondition(
      s.conditions,
      {
        type: 'Ready',
        status: 'True',
        reason: 'FunctionRegistered',
        message: 'function is registered and ready for calls',
        ...(gen ? { observedGeneration: gen } : {}),
      },
      now,
    ),
  };
}

/** A function Run's end (cancel, timeout, idle timeout, registration failure): its terminal phase, Ready=False, no endpoint. */
export function functionEnded(s: RunStatus, now: string, reason: string, message: string): RunStatus {
  const failed = terminalFailure(s, now, reason, message);
  return {
    ...failed,
    endpoint: null,
    conditions: setCondition(
      failed.conditions,
      { type: 'Ready', status: 'False', reason, message: failed.message ?? message },
      now,
    ),
  };
}
