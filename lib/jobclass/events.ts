/**
 * Conditions and Events for the JobClass API. Every condition transition (status or reason
 * change) becomes a core/v1 Event whose name is derived from the transition, so a retried
 * invocation recreates the same name and the host's create treats AlreadyExists as done: an
 * Event per transition, at least once, without duplicates.
 */
import { setCondition, type Condition } from '../run/conditions.ts';
import type { EventSpec } from '../fn/events.ts';

export { eventOp, involvedOf, type EventSpec, type Involved } from '../fn/events.ts';

const WARN_WHEN_FALSE = new Set(['Accepted', 'Ready', 'Scheduled', 'BackendReachable']);
const WARN_WHEN_TRUE = new Set(['Failed', 'ResultUnknown']);

/** Progress reasons that are expected on the way to True, not problems. */
const PROGRESS = new Set(['CreatingSandbox']);

function severity(c: Condition): 'Normal' | 'Warning' {
  if (c.status === 'False' && WARN_WHEN_FALSE.has(c.type) && !PROGRESS.has(c.reason)) return 'Warning';
  if (c.status === 'True' && WARN_WHEN_TRUE.has(c.type)) return 'Warning';
  return 'Normal';
}

/** One Event per condition whose status or reason changed between prev and next. */
export function conditionEvents(prev: Condition[] | undefined, next: Condition[]): EventSpec[] {
  const out: EventSpec[] = [];
  for (const c of next) {
    const p = prev?.find((x) => x.type === c.type);
    if (p && p.status === c.status && p.reason === c.reason) continue;
    out.push({
      type: severity(c),
      reason: c.reason,
      message: `${c.type}=${c.status}: ${c.message}`,
      key: `${c.type}|${p ? `${p.status}/${p.reason}/${p.lastTransitionTime}` : 'none'}|${c.status}`,
    });
  }
  return out;
}

export type ConditionInput = Omit<Condition, 'lastTransitionTime' | 'observedGeneration'>;

/** Sets several conditions (lastTransitionTime kept while the status is unchanged). */
export function withConditions(
  list: Condition[] | undefined,
  updates: ConditionInput[],
  now: Date,
  generation?: number,
): Condition[] {
  let out = list ?? [];
  for (const u of updates)
    out = setCondition(
      out,
      { ...u, ...(generation !== undefined ? { observedGeneration: generation } : {}) },
      now.toISOString(),
    );
  return out;
}

export function isTrue(list: Condition[] | undefined, type: string): boolean {
  return list?.find((c) => c.type === type)?.status === 'True';
}

export function conditionOf(list: Condition[] | undefined, type: string): Condition | undefined {
  return list?.find((c) => c.type === type);
}

export { sameJson, stableJson } from '../kube/same-json.ts';
