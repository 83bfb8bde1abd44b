/** Shared types and constants of the pure Run scheduling core (no I/O). */
import type { Run } from '../../lib/api/generated/kruntimes.ts';

/** spec.affinity of a Run (the CRD RunAffinity shape). */
export type RunAffinity = NonNullable<Run['spec']['affinity']>;
/** One RunAffinityRules block (runAffinity or runAntiAffinity). */
export type RunAffinityRules = NonNullable<RunAffinity['runAffinity']>;
export type RunAffinityTerm = NonNullable<RunAffinityRules['requiredDuringSchedulingIgnoredDuringExecution']>[number];
export type WeightedRunAffinityTerm = NonNullable<
  RunAffinityRules['preferredDuringSchedulingIgnoredDuringExecution']
>[number];
/** metav1.LabelSelector as embedded in a RunAffinityTerm. */
export type LabelSelector = RunAffinityTerm['labelSelector'];
export type TopologyKey = RunAffinityTerm['topologyKey'];

/** The scheduler's view of one Runtime Pod (a Pod labelled runtime=<name>). */
export interface RuntimePod {
  name: string;
  uid: string;
  namespace: string;
  nodeName?: string;
  /** Labels of the Pod's Node, used for the Node topology keys. */
  nodeLabels?: Record<string, string>;
  /** Pod status.phase. */
  phase: string;
  /** metadata.deletionTimestamp is set. */
  deleting: boolean;
  /** Pod condition Ready is True. */
  podReady: boolean;
  /** Pod condition kruntimes.io/RuntimedReady (the runtimed heartbeat). */
  runtimedReady?: { status: string; lastProbeTime?: string };
  annotations: Record<string, string>;
}

/** The scheduler's view of one Run. */
export interface RunView {
  name: string;
  namespace: string;
  uid: string;
  labels: Record<string, string>;
  creationTimestamp: string;
  /** status.phase; empty means Pending. */
  phase: string;
  /** status.assignedPod (active Runs). */
  assignedPod?: string;
  /** Raw spec.resources.requests (Quantity strings; int-or-string numbers are tolerated). */
  requests: Record<string, string>;
  affinity?: RunAffinity;
  workspace?: { name: string };
}

export type WorkspacePhase = 'Pending' | 'Bound' | 'Lost' | 'Released';

/** The scheduler's view of one PersistentWorkspace (spec.runtime plus binding status). */
export interface WorkspaceView {
  name: string;
  /** spec.runtime */
  runtime: string;
  phase?: WorkspacePhase;
  boundPod?: string;
  boundPodUID?: string;
  /** metadata.deletionTimestamp is set: cleanup was requested, no new Run may claim it. */
  deleting?: boolean;
}

export interface PlanInput {
  /** Runtime name; all pods carry runtime=<runtime>. */
  runtime: string;
  /** Pending Runs; planned in FIFO order (creationTimestamp, then name) whatever order they are given in. */
  pending: RunView[];
  /** Active Runs: Scheduled|Running|Ready with assignedPod. Others are ignored. */
  active: RunView[];
  pods: RuntimePod[];
  /** PersistentWorkspaces keyed by name (or "<namespace>/<name>", which wins when present). */
  workspaces: Map<string, WorkspaceView>;
  now: Date;
  /** RuntimedReady lastProbeTime freshness bound; default (and when ≤ 0) 15000 ms, as upstream. */
  heartbeatStaleMs?: number;
}

export interface Binding {
  run: RunView;
  pod: RuntimePod;
}
export interface Waiting {
  run: RunView;
  reason: WaitReason;
  message: string;
}
export interface Failure {
  run: RunView;
  reason: FailReason;
  message: string;
}
export interface Plan {
  bind: Binding[];
  wait: Waiting[];
  fail: Failure[];
}

export const WAIT_REASONS = [
  'NoRuntimePods',
  'InsufficientCapacity',
  'UnsatisfiedRunAffinity',
  'UnsatisfiedRunAntiAffinity',
  'WorkspaceNotFound',
  'WorkspaceRuntimeMismatch',
  'WorkspacePending',
  'WorkspaceLost',
  'WorkspaceReleased',
  'WorkspaceDeleting',
  'WorkspacePodUnavailable',
  'WorkspacePodUIDMismatch',
] as const;
export type WaitReason = (typeof WAIT_REASONS)[number];
export type FailReason = 'InvalidResources' | 'InvalidAffinity';

/** Phases in which an assigned Run consumes capacity and is an affinity target. */
export const ACTIVE_PHASES: ReadonlySet<string> = new Set(['Scheduled', 'Running', 'Ready']);
export const RUNS_RESOURCE = 'runs';
export const DEFAULT_RUNS_CAPACITY = 2n;
export const CAPACITY_ANNOTATION_PREFIX = 'kruntimes.io/capacity.';
export const DEFAULT_HEARTBEAT_STALE_MS = 15_000;

export const TOPOLOGY_RUNTIME_POD = 'kruntimes.io/runtime-pod';
/** Supported topology keys, in CRD enum order. */
export const TOPOLOGY_KEYS: readonly TopologyKey[] = [
  TOPOLOGY_RUNTIME_POD,
  'kubernetes.io/hostname',
  'topology.kubernetes.io/zone',
  'topology.kubernetes.io/region',
];
