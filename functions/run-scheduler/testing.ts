/** Test fixtures for the Run scheduling core (used only by *.test.ts). */
import type { RunAffinityTerm, RunView, RuntimePod, TopologyKey, WorkspaceView } from './types.ts';

export const NOW = new Date('2026-07-06T12:00:00Z');
export const FRESH = '2026-07-06T11:59:55Z';

/** A ready Runtime Pod with a fresh heartbeat in namespace "ns". */
export function pod(name: string, over: Partial<RuntimePod> = {}): RuntimePod {
  return {
    name,
    uid: `uid-${name}`,
    namespace: 'ns',
    nodeName: `node-${name}`,
    phase: 'Running',
    deleting: false,
    podReady: true,
    runtimedReady: { status: 'True', lastProbeTime: FRESH },
    annotations: {},
    ...over,
  };
}

export function capacityAnnotations(capacity: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(capacity).map(([k, v]) => [`kruntimes.io/capacity.${k}`, v]));
}

let seq = 0;

/** A Pending Run created at second `t` (default: creation order). */
export function run(name: string, over: Partial<RunView> & { t?: number } = {}): RunView {
  const { t, ...rest } = over;
  const second = t ?? seq++;
  return {
    name,
    namespace: 'ns',
    uid: `uid-${name}`,
    labels: {},
    phase: 'Pending',
    requests: {},
    creationTimestamp: new Date(Date.UTC(2026, 6, 6, 10, 0, second)).toISOString().replace('.000Z', 'Z'),
    ...rest,
  };
}

/** An active Run assigned to a Pod. */
export function activeRun(name: string, podName: string, over: Partial<RunView> = {}): RunView {
  return run(name, { phase: 'Running', assignedPod: podName, t: 0, ...over });
}

export function term(
  matchLabels: Record<string, string>,
  topologyKey: TopologyKey = 'kruntimes.io/runtime-pod',
): RunAffinityTerm {
  return { labelSelector: { matchLabels }, topologyKey };
}

export function ws(name: string, over: Partial<WorkspaceView> = {}): WorkspaceView {
  return { name, runtime: 'bash', ...over };
}

export function workspaces(...views: WorkspaceView[]): Map<string, WorkspaceView> {
  return new Map(views.map((w) => [w.name, w]));
}
