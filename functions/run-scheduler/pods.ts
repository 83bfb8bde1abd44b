/** Runtime Pod availability (upstream isPodSchedulable + runtimepod.FreshRuntimedReady). */
import { DEFAULT_HEARTBEAT_STALE_MS, type RuntimePod } from './types.ts';

/** The effective heartbeat bound: upstream replaces a non-positive setting with the 15 s default. */
export function heartbeatBound(heartbeatStaleMs: number | undefined): number {
  return heartbeatStaleMs !== undefined && Number.isFinite(heartbeatStaleMs) && heartbeatStaleMs > 0
    ? heartbeatStaleMs
    : DEFAULT_HEARTBEAT_STALE_MS;
}

/** RuntimedReady is True and its lastProbeTime is at most staleMs before now (a missing or unparseable time is stale). */
export function runtimedFresh(pod: RuntimePod, now: Date, staleMs: number): boolean {
  const cond = pod.runtimedReady;
  if (!cond || cond.status !== 'True') return false;
  const probed = cond.lastProbeTime === undefined ? NaN : Date.parse(cond.lastProbeTime);
  if (Number.isNaN(probed)) return false;
  return now.getTime() - probed <= staleMs;
}

/** Phase Running, not being deleted, PodReady=True and a fresh RuntimedReady heartbeat. */
export function podAvailable(pod: RuntimePod, now: Date, staleMs: number): boolean {
  return pod.phase === 'Running' && !pod.deleting && pod.podReady && runtimedFresh(pod, now, staleMs);
}
