/** Pure computation of a Pod's phase, conditions and container statuses from runtime state. */
import type { Container, ContainerStatus, PodCondition, PodStatus } from './pod-types.ts';

export type ContainerState =
  | { waiting: { reason: string; message?: string } }
  | { running: { startedAt: string } }
  | {
      terminated: {
        exitCode: number;
        reason: string;
        message?: string;
        startedAt?: string;
        finishedAt: string;
        containerID?: string;
      };
    };

export interface ContainerView {
  spec: Container;
  state: ContainerState;
  lastState?: ContainerState;
  restartCount: number;
  ready: boolean;
  started: boolean;
  containerID?: string;
  /** True while a restart is scheduled. */
  willRestart: boolean;
}

export interface PodView {
  podIP: string;
  hostIP: string;
  startTime: string;
  initialized: boolean;
  initContainers: ContainerView[];
  containers: ContainerView[];
  /** A pod-level failure (deadline, unrecoverable setup error) forces Failed. */
  failed?: { reason: string; message: string };
  sandboxReady: boolean;
}

export function containerStatus(v: ContainerView): ContainerStatus {
  return {
    name: v.spec.name,
    image: v.spec.image,
    imageID: `kruntimes-local://${v.spec.image}`,
    ...(v.containerID ? { containerID: v.containerID } : {}),
    ready: v.ready,
    started: v.started,
    restartCount: v.restartCount,
    state: v.state,
    lastState: v.lastState ?? {},
  };
}

function terminatedOf(v: ContainerView): { exitCode: number } | undefined {
  return 'terminated' in v.state ? v.state.terminated : undefined;
}

export function podPhase(p: PodView): string {
  if (p.failed) return 'Failed';
  const init = p.initContainers.find((c) => terminatedOf(c) && terminatedOf(c)!.exitCode !== 0 && !c.willRestart);
  if (init) return 'Failed';
  if (!p.initialized) return 'Pending';
  const cs = p.containers;
  const done = cs.every((c) => terminatedOf(c) && !c.willRestart);
  if (done) return cs.every((c) => terminatedOf(c)!.exitCode === 0) ? 'Succeeded' : 'Failed';
  if (cs.every((c) => c.started || c.restartCount > 0)) return 'Running';
  return 'Pending';
}

function cond(
  type: string,
  ok: boolean,
  now: string,
  previous: PodCondition[] | undefined,
  reason?: string,
): PodCondition {
  const status = ok ? 'True' : 'False';
  const prev = previous?.find((c) => c.type === type);
  const lastTransitionTime = prev && prev.status === status && prev.lastTransitionTime ? prev.lastTransitionTime : now;
  return { type, status, lastTransitionTime, ...(reason && !ok ? { reason } : {}) };
}

export function buildPodStatus(p: PodView, now: string, previous?: PodCondition[]): PodStatus {
  const phase = podPhase(p);
  const terminal = phase === 'Succeeded' || phase === 'Failed';
  const containersReady = !terminal && p.containers.every((c) => c.ready);
  const completed = phase === 'Succeeded' ? 'PodCompleted' : 'ContainersNotReady';
  return {
    phase,
    hostIP: p.hostIP,
    podIP: p.podIP,
    podIPs: [{ ip: p.podIP }],
    hostIPs: [{ ip: p.hostIP }],
    startTime: p.startTime,
    conditions: [
      cond('PodReadyToStartContainers', p.sandboxReady && !terminal, now, previous),
      cond('Initialized', p.initialized, now, previous, 'ContainersNotInitialized'),
      cond('ContainersReady', containersReady, now, previous, completed),
      cond('Ready', containersReady, now, previous, completed),
    ],
    containerStatuses: p.containers.map(containerStatus),
    ...(p.initContainers.length ? { initContainerStatuses: p.initContainers.map(containerStatus) } : {}),
    ...(p.failed ? { reason: p.failed.reason, message: p.failed.message } : {}),
  } as PodStatus;
}

/** Whether a container that exited with exitCode restarts under the pod's restart policy. */
export function shouldRestart(policy: string | undefined, exitCode: number): boolean {
  if (policy === 'Never') return false;
  if (policy === 'OnFailure') return exitCode !== 0;
  return true;
}

export const BACKOFF_INITIAL_MS = 500;
export const BACKOFF_MAX_MS = 60_000;

/** A container's crash-loop backoff: the last delay and when it was chosen (epoch ms). */
export interface Backoff {
  delayMs: number;
  at: number;
}

/**
 * kubelet-like crash-loop backoff (its flowcontrol.Backoff), faster at the start for a local
 * environment: the delay doubles per restart up to the cap, and starts over once the container
 * has gone twice the cap without a restart. Counting restarts since the Pod began instead made
 * a long-lived server killed now and then (the soak's extension server) wait the full minute
 * from its seventh kill on, however long it had run in between.
 */
export function restartBackoff(prev: Backoff | undefined, nowMs: number): Backoff {
  if (!prev || nowMs - prev.at > 2 * BACKOFF_MAX_MS) return { delayMs: BACKOFF_INITIAL_MS, at: nowMs };
  return { delayMs: Math.min(BACKOFF_MAX_MS, prev.delayMs * 2), at: nowMs };
}
