/**
 * runtimed's heartbeat on its Pod (the kruntimes.io/RuntimedReady condition's lastProbeTime,
 * renewed every 5 s) is most of the Runtime Pods' updates. The scheduler and the reaper read the
 * heartbeat whenever they run; an update that only renews it changes nothing they decide as long
 * as the heartbeat it replaces was still fresh when it arrived (issue 17).
 */
import type { KubeObject } from '../kube/types.ts';

export const RUNTIMED_READY = 'kruntimes.io/RuntimedReady';

interface Condition {
  type: string;
  lastProbeTime?: string;
}

type PodLike = KubeObject & { status?: { conditions?: Condition[] } };

const beatOf = (p: PodLike): number =>
  Date.parse(p.status?.conditions?.find((c) => c.type === RUNTIMED_READY)?.lastProbeTime ?? '');

/** The Pod without what every write or heartbeat changes: resourceVersion, managedFields, the probe time. */
function withoutBeat(p: PodLike): string {
  const {
    resourceVersion: _rv,
    managedFields: _mf,
    ...metadata
  } = p.metadata as KubeObject['metadata'] & {
    managedFields?: unknown;
  };
  const conditions = p.status?.conditions?.map((c) => {
    if (c.type !== RUNTIMED_READY) return c;
    const { lastProbeTime: _t, ...rest } = c;
    return rest;
  });
  return JSON.stringify({ ...p, metadata, status: { ...p.status, ...(conditions ? { conditions } : {}) } });
}

/**
 * The comparison of one update's two versions, kept per new version: the relay hands the same
 * event to every trigger of an informer (the scheduler's and the reaper's), so each update is
 * serialised once, not once per trigger.
 */
const compared = new WeakMap<KubeObject, { old: KubeObject; same: boolean }>();

function sameBesidesBeat(old: PodLike, object: PodLike): boolean {
  const hit = compared.get(object);
  if (hit?.old === old) return hit.same;
  const same = withoutBeat(old) === withoutBeat(object);
  compared.set(object, { old, same });
  return same;
}

/**
 * Whether an update of a Runtime Pod only renewed runtimed's heartbeat, the one it replaces being
 * fresh at nowMs (younger than staleMs): whoever judged the Pod by the old heartbeat before now
 * judged it fresh, so the update changes no decision. A heartbeat that returns after a stale one,
 * or any other change, is not heartbeat-only.
 */
export function heartbeatOnly(
  e: { type: 'added' | 'updated' | 'deleted'; object: KubeObject; old?: KubeObject },
  nowMs: number,
  staleMs: number,
): boolean {
  if (e.type !== 'updated' || !e.old) return false;
  const before = beatOf(e.old);
  const after = beatOf(e.object);
  if (!Number.isFinite(before) || !Number.isFinite(after) || after <= before || nowMs - before >= staleMs) return false;
  return sameBesidesBeat(e.old, e.object);
}
