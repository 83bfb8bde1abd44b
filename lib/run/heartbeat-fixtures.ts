/** A Runtime Pod with runtimed's heartbeat, for the tests of heartbeat.ts and of the triggers that use it. */
import type { KubeObject } from '../kube/types.ts';
import { RUNTIMED_READY } from './heartbeat.ts';

export const T0 = Date.parse('2026-12-02T09:00:00Z');
const iso = (ms: number): string => new Date(ms).toISOString();

/** A Runtime Pod as runtimed and the node agent keep it, with its heartbeat at beatMs. */
export function runtimePod(
  beatMs: number,
  rv: string,
  over: { ready?: string; labels?: Record<string, string> } = {},
): KubeObject {
  return {
    metadata: {
      name: 'p',
      namespace: 'ns',
      uid: 'u',
      resourceVersion: rv,
      labels: over.labels ?? { 'kruntimes.io/runtime': 'rt' },
    },
    spec: { nodeName: 'n' },
    status: {
      phase: 'Running',
      conditions: [
        { type: 'Ready', status: over.ready ?? 'True', lastTransitionTime: iso(T0 - 60_000) },
        {
          type: RUNTIMED_READY,
          status: 'True',
          reason: 'Heartbeat',
          lastProbeTime: iso(beatMs),
          lastTransitionTime: iso(T0 - 60_000),
        },
      ],
    },
  };
}
