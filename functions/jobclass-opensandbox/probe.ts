/**
 * Pure part of the backend probe behind an OpenSandbox class's Ready condition: the adapter
 * lists one sandbox with the parameters' endpoint and API key (an authenticated call the spec
 * defines) and records the verdict as the parameters' BackendReachable condition plus
 * status.probe {endpoint, apiKeySecretResourceVersion, time}; the JobClass controller derives
 * Ready from it. Pool exhaustion is never probed: capacity is not readiness.
 */
import type { Operation } from '../../lib/fn/types.ts';
import { API_VERSION, X, type OpenSandboxParameters } from '../../lib/jobclass/api.ts';
import {
  conditionEvents,
  eventOp,
  involvedOf,
  sameJson,
  withConditions,
  type ConditionInput,
} from '../../lib/jobclass/events.ts';
import type { Problem } from '../../lib/jobclass/resolve.ts';
import type { BackendFailure } from './core.ts';
import { COMPONENT, requeue } from './status.ts';

export const PROBE_INTERVAL_MS = 60_000;
export const PROBE_RETRY_MS = 15_000;
/** Rewrite an unchanged verdict at most this often (keeps status.probe.time fresh for Ready). */
export const PROBE_REFRESH_MS = 120_000;

export type ProbeResult = { ok: true } | { ok: false; error: BackendFailure } | { ok: false; problem: Problem };

function verdict(r: ProbeResult): ConditionInput {
  if (r.ok)
    return {
      type: 'BackendReachable',
      status: 'True',
      reason: 'Reachable',
      message: 'the API answered an authenticated list request',
    };
  if ('problem' in r)
    return { type: 'BackendReachable', status: 'False', reason: r.problem.reason, message: r.problem.message };
  const auth = r.error.kind === 'unauthorized' || r.error.kind === 'forbidden';
  return {
    type: 'BackendReachable',
    status: 'False',
    reason: auth ? 'BackendAuthenticationFailed' : 'BackendUnreachable',
    message: r.error.message,
  };
}

/** The status write (when the verdict changed or is due for refresh), its Events, and the next probe. */
/**
 * A 429 answer: the server is up and only busy (capacity is not readiness). The last verdict on
 * this endpoint stands, with the Secret version it was made with, and its time is refreshed so it
 * does not go stale; without one, nothing is recorded and the probe is retried.
 */
function rateLimited(params: OpenSandboxParameters, now: Date): Operation[] {
  const prev = params.status ?? {};
  const last = prev.conditions?.find((c) => c.type === 'BackendReachable');
  if (!last || !prev.probe || prev.probe.endpoint !== params.spec.endpoint) return [requeue(PROBE_RETRY_MS)];
  const next = { ...prev, probe: { ...prev.probe, time: now.toISOString() } };
  return [
    { op: 'status', resource: X.openSandboxParameters, object: { ...params, status: next } },
    requeue(last.status === 'True' ? PROBE_INTERVAL_MS : PROBE_RETRY_MS),
  ];
}

export function probeOps(
  params: OpenSandboxParameters,
  r: ProbeResult,
  secretResourceVersion: string | undefined,
  now: Date,
): Operation[] {
  if (!r.ok && 'error' in r && r.error.kind === 'rate-limited') return rateLimited(params, now);
  const c = verdict(r);
  const prev = params.status ?? {};
  const conditions = withConditions(prev.conditions, [c], now, params.metadata.generation);
  const probe = {
    endpoint: params.spec.endpoint,
    ...(secretResourceVersion ? { apiKeySecretResourceVersion: secretResourceVersion } : {}),
    time: now.toISOString(),
  };
  const next = { ...prev, observedGeneration: params.metadata.generation ?? 0, conditions, probe };
  const unchanged = sameJson(
    { ...prev, probe: { ...prev.probe, time: undefined } },
    { ...next, probe: { ...probe, time: undefined } },
  );
  const fresh = prev.probe?.time !== undefined && now.getTime() - Date.parse(prev.probe.time) < PROBE_REFRESH_MS;
  const ops: Operation[] = [];
  if (!(unchanged && fresh)) {
    const involved = involvedOf(params, API_VERSION, 'OpenSandboxExecutionParameters');
    ops.push(...conditionEvents(prev.conditions, conditions).map((e) => eventOp(involved, e, now, COMPONENT)));
    ops.push({ op: 'status', resource: X.openSandboxParameters, object: { ...params, status: next } });
  }
  ops.push(requeue(c.status === 'True' ? PROBE_INTERVAL_MS : PROBE_RETRY_MS));
  return ops;
}
