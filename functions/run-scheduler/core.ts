/**
 * Pure scheduling core of the Run scheduler: no I/O, no API client, time injected.
 *
 * planBatch plans every pending Run of one Runtime in FIFO order against a snapshot of the
 * Runtime Pods, the active Runs and the PersistentWorkspaces. Each Run is either bound to a
 * Pod, left waiting (Pending, with the reason it cannot be placed yet) or failed (its spec
 * can never be scheduled). A Run bound earlier in the batch immediately counts toward Pod usage
 * and is an affinity target for later Runs, so a batch never over-commits capacity and later
 * anti-affinity sees earlier binds. A binding that could satisfy the required affinity of an
 * earlier waiting Run sends the scan back to that Run first (FIFO fairness, see planBatch).
 *
 * Per Run (reference §3.2): requests (InvalidResources) → affinity compilation
 * (InvalidAffinity) → workspace fencing → per-Pod filters in order: availability, capacity,
 * required affinity, required anti-affinity → scores PreferredRunAffinity + LeastLoaded →
 * total desc, Pod name asc.
 */
import {
  affinityVerdict,
  compileAffinity,
  topologyValue,
  type AffinityTarget,
  type CompiledAffinity,
} from './affinity.ts';
import { heartbeatBound, podAvailable } from './pods.ts';
import type { Rat } from '../../lib/kube/quantity.ts';
import {
  addUsage,
  fits,
  formatRequests,
  parseRequests,
  podCapacityExact,
  requestMap,
  type Usage,
} from './resources.ts';
import { rankCandidates, type Candidate } from './score.ts';
import { matchesSelector } from '../../lib/kube/selector.ts';
import {
  ACTIVE_PHASES,
  type Binding,
  type FailReason,
  type Plan,
  type PlanInput,
  type RunView,
  type RuntimePod,
  type WaitReason,
} from './types.ts';
import {
  fenceAdmits,
  fenceRejection,
  workspacePodUnavailable,
  workspaceState,
  type WorkspaceFence,
} from './workspace.ts';

export * from './types.ts';
export { parseRequests, podCapacity, podCapacityExact, fits } from './resources.ts';
export { matchesSelector, validateSelector } from '../../lib/kube/selector.ts';
export { topologyValue, compileAffinity, affinityVerdict, type AffinityTarget } from './affinity.ts';
export { podAvailable, runtimedFresh } from './pods.ts';
export { rankCandidates, loadKey, leastLoadedScores, normalizeByMaximum, type ScoredPod } from './score.ts';
export { workspaceState, workspaceAllows, lookupWorkspace } from './workspace.ts';
export { parseQuantity } from '../../lib/kube/quantity.ts';

/** Mutable batch state: Pod usage and affinity targets grow with every binding. */
interface BatchState {
  runtime: string;
  now: Date;
  staleMs: number;
  workspaces: PlanInput['workspaces'];
  /** Pods per namespace, sorted by (name, uid). */
  pods: Map<string, RuntimePod[]>;
  /** First Pod per name per namespace (Node lookup for targets). */
  podIndex: Map<string, Map<string, RuntimePod>>;
  usage: Map<string, Usage>;
  capacity: Map<RuntimePod, Map<string, Rat>>;
  targets: AffinityTarget[];
}

type Decision =
  | { kind: 'bind'; pod: RuntimePod; request: Map<string, bigint> }
  | { kind: 'wait'; reason: WaitReason; message: string }
  | { kind: 'fail'; reason: FailReason; message: string };

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function timeOf(run: RunView): number {
  const t = Date.parse(run.creationTimestamp);
  return Number.isNaN(t) ? Number.POSITIVE_INFINITY : t;
}

/** FIFO: creationTimestamp (unparseable last), then name, namespace and UID. */
export function fifoCompare(a: RunView, b: RunView): number {
  const ta = timeOf(a);
  const tb = timeOf(b);
  if (ta !== tb) return ta < tb ? -1 : 1;
  return compareStrings(a.name, b.name) || compareStrings(a.namespace, b.namespace) || compareStrings(a.uid, b.uid);
}

/** The Runs in fifoCompare's order, each creationTimestamp parsed once (not once per comparison). */
function fifoOrder(runs: RunView[]): RunView[] {
  const times = new Map(runs.map((r) => [r, timeOf(r)]));
  return [...runs].sort((a, b) => {
    const ta = times.get(a) ?? Number.POSITIVE_INFINITY;
    const tb = times.get(b) ?? Number.POSITIVE_INFINITY;
    if (ta !== tb) return ta < tb ? -1 : 1;
    return compareStrings(a.name, b.name) || compareStrings(a.namespace, b.namespace) || compareStrings(a.uid, b.uid);
  });
}

function comparePods(a: RuntimePod, b: RuntimePod): number {
  return compareStrings(a.name, b.name) || compareStrings(a.uid, b.uid);
}

const usageKey = (namespace: string, pod: string): string => `${namespace}/${pod}`;

export function isActive(run: RunView): boolean {
  return ACTIVE_PHASES.has(run.phase) && !!run.assignedPod;
}

function indexPods(pods: RuntimePod[]): Pick<BatchState, 'pods' | 'podIndex'> {
  const byNs = new Map<string, RuntimePod[]>();
  const index = new Map<string, Map<string, RuntimePod>>();
  for (const pod of [...pods].sort(comparePods)) {
    byNs.set(pod.namespace, [...(byNs.get(pod.namespace) ?? []), pod]);
    const names = index.get(pod.namespace) ?? new Map<string, RuntimePod>();
    if (!names.has(pod.name)) names.set(pod.name, pod);
    index.set(pod.namespace, names);
  }
  return { pods: byNs, podIndex: index };
}

function initialState(input: PlanInput): BatchState {
  const state: BatchState = {
    runtime: input.runtime,
    now: input.now,
    staleMs: heartbeatBound(input.heartbeatStaleMs),
    workspaces: input.workspaces,
    ...indexPods(input.pods),
    usage: new Map(),
    capacity: new Map(),
    targets: [],
  };
  const seen = new Set<string>();
  for (const run of input.active) {
    if (!isActive(run) || seen.has(run.uid)) continue;
    seen.add(run.uid);
    const pod = run.assignedPod ?? '';
    state.targets.push({ uid: run.uid, namespace: run.namespace, podName: pod, labels: run.labels });
    const parsed = parseRequests(run.requests);
    if (parsed.ok) addUsage(usageOf(state, run.namespace, pod), requestMap(parsed.requests));
  }
  return state;
}

function usageOf(state: BatchState, namespace: string, pod: string): Usage {
  const key = usageKey(namespace, pod);
  const usage = state.usage.get(key) ?? new Map<string, bigint>();
  state.usage.set(key, usage);
  return usage;
}

function capacityOf(state: BatchState, pod: RuntimePod): Map<string, Rat> {
  let capacity = state.capacity.get(pod);
  if (!capacity) {
    capacity = podCapacityExact(pod.annotations);
    state.capacity.set(pod, capacity);
  }
  return capacity;
}

interface Rejections {
  unavailable: number;
  capacity: number;
  affinity: number;
  anti: number;
}

function filterPods(
  state: BatchState,
  pods: RuntimePod[],
  affinity: CompiledAffinity,
  request: Map<string, bigint>,
): { candidates: Candidate[]; rejections: Rejections } {
  const rejections: Rejections = { unavailable: 0, capacity: 0, affinity: 0, anti: 0 };
  const candidates: Candidate[] = [];
  for (const pod of pods) {
    const capacity = capacityOf(state, pod);
    const usage = state.usage.get(usageKey(pod.namespace, pod.name));
    if (!podAvailable(pod, state.now, state.staleMs)) rejections.unavailable++;
    else if (!fits(capacity, usage, request)) rejections.capacity++;
    else {
      const verdict = affinityVerdict(affinity, pod);
      if (verdict === 'UnsatisfiedRunAffinity') rejections.affinity++;
      else if (verdict === 'UnsatisfiedRunAntiAffinity') rejections.anti++;
      else candidates.push({ pod, capacity, usage });
    }
  }
  return { candidates, rejections };
}

function waitDecision(
  runtime: string,
  rejections: Rejections,
  request: Map<string, bigint>,
  fence: WorkspaceFence | undefined,
): Decision {
  const rt = JSON.stringify(runtime);
  if (rejections.affinity > 0) {
    return {
      kind: 'wait',
      reason: 'UnsatisfiedRunAffinity',
      message: `waiting for available runtime pods satisfying required Run affinity for runtime ${rt}`,
    };
  }
  if (rejections.anti > 0) {
    return {
      kind: 'wait',
      reason: 'UnsatisfiedRunAntiAffinity',
      message: `waiting for available runtime pods satisfying required Run anti-affinity for runtime ${rt}`,
    };
  }
  if (rejections.capacity > 0) {
    const where = fence
      ? `bound runtime pod "${fence.pod}" of PersistentWorkspace ${JSON.stringify(fence.workspace)} does not have enough free capacity`
      : 'no ready pod has enough free capacity';
    return {
      kind: 'wait',
      reason: 'InsufficientCapacity',
      message: `waiting for runtime capacity for runtime ${rt}: requested ${formatRequests(request)}, ${where}`,
    };
  }
  if (fence) return { kind: 'wait', ...workspacePodUnavailable(fence) };
  return { kind: 'wait', reason: 'NoRuntimePods', message: `waiting for available runtime pods for runtime ${rt}` };
}

function decide(state: BatchState, run: RunView): Decision {
  const parsed = parseRequests(run.requests);
  if (!parsed.ok) return { kind: 'fail', reason: 'InvalidResources', message: parsed.message };
  const request = requestMap(parsed.requests);
  const affinity = compileAffinity(
    run,
    state.targets,
    state.podIndex.get(run.namespace) ?? new Map<string, RuntimePod>(),
  );
  if (typeof affinity === 'string')
    return { kind: 'fail', reason: 'InvalidAffinity', message: `pod selection failed: ${affinity}` };
  const ws = workspaceState(run, state.runtime, state.workspaces);
  if (!ws.ok) return { kind: 'wait', reason: ws.reason, message: ws.message };
  let pods = state.pods.get(run.namespace) ?? [];
  if (ws.fence) {
    const rejected = fenceRejection(ws.fence, pods);
    if (rejected) return { kind: 'wait', ...rejected };
    pods = pods.filter((pod) => fenceAdmits(ws.fence, pod));
  }
  const { candidates, rejections } = filterPods(state, pods, affinity, request);
  const best = candidates.length > 0 ? rankCandidates(candidates, affinity, request)[0] : undefined;
  if (!best) return waitDecision(state.runtime, rejections, request, ws.fence);
  return { kind: 'bind', pod: best.pod, request };
}

/**
 * Whether a Run just bound to pod could satisfy one of run's required affinity terms: same
 * namespace, labels matching the term's selector, and the Pod is in a domain for its key.
 */
function couldHelp(run: RunView, bound: RunView, pod: RuntimePod): boolean {
  if (run.namespace !== bound.namespace) return false;
  const terms = run.affinity?.runAffinity?.requiredDuringSchedulingIgnoredDuringExecution ?? [];
  return terms.some(
    (t) => topologyValue(pod, t.topologyKey) !== undefined && matchesSelector(t.labelSelector, bound.labels),
  );
}

/**
 * Marks for re-evaluation the Runs waiting on required affinity that the bound Run could now
 * satisfy, and returns the earliest such position (or `next` when there is none earlier).
 */
function wakeAffinityWaiters(
  order: RunView[],
  decisions: (Decision | undefined)[],
  dirty: boolean[],
  bound: Binding,
  next: number,
): number {
  let resume = next;
  decisions.forEach((d, j) => {
    const waiter = order[j];
    if (
      d?.kind !== 'wait' ||
      d.reason !== 'UnsatisfiedRunAffinity' ||
      !waiter ||
      !couldHelp(waiter, bound.run, bound.pod)
    )
      return;
    dirty[j] = true;
    resume = Math.min(resume, j);
  });
  return resume;
}

function bindInto(state: BatchState, run: RunView, decision: Extract<Decision, { kind: 'bind' }>): void {
  addUsage(usageOf(state, run.namespace, decision.pod.name), decision.request);
  state.targets.push({ uid: run.uid, namespace: run.namespace, podName: decision.pod.name, labels: run.labels });
}

export interface PlanOptions {
  /** Answer a plain Run from the wait of an earlier one of the same shape (default true; see plainShape). */
  memo?: boolean;
  /** Counts the Runs decided against the Pods (the rest were answered by the memo). */
  stats?: { evaluated: number };
}

/**
 * The shape of a Run without affinity or workspace: its namespace and requests, all its decision
 * depends on. Within a batch such a Run's wait is final for its shape: Pod availability is fixed,
 * usage only grows (a Pod without room keeps none) and it has no affinity to satisfy, so a later
 * Run of the same shape waits with the same reason and message. A backlog of N such Runs is then
 * decided against the Pods only until the first waits, not N times per invocation (issue 17).
 */
export function plainShape(run: RunView): string | undefined {
  if (run.affinity !== undefined || run.workspace !== undefined) return undefined;
  const requests = Object.entries(run.requests);
  if (requests.length === 0) return run.namespace;
  return JSON.stringify([run.namespace, requests.sort(([a], [b]) => compareStrings(a, b))]);
}

/**
 * Plans one batch of pending Runs of `input.runtime` (see the module comment). Deterministic:
 * the result depends neither on the order of `pods` nor on the order of `pending`/`active`.
 *
 * FIFO fairness: Runs are decided in FIFO order, and every binding returns the scan to the
 * earliest Run that waits on required affinity the new binding could satisfy, so an earlier
 * Run always gets the first chance at a state that could admit it. (Every other waiting
 * reason is monotone within a batch: capacity only shrinks and targets only grow.) `bind`
 * lists bindings in the order they were made, which is the order in which their usage and
 * targets were accounted; `wait` and `fail` are in FIFO order.
 */
export function planBatch(input: PlanInput, opts: PlanOptions = {}): Plan {
  const state = initialState(input);
  const order = fifoOrder(input.pending);
  const decisions: (Decision | undefined)[] = new Array<Decision | undefined>(order.length).fill(undefined);
  const dirty = new Array<boolean>(order.length).fill(true);
  const bind: Plan['bind'] = [];
  const waits = new Map<string, Decision>();
  for (let i = 0; i < order.length;) {
    const run = order[i] as RunView;
    if (!dirty[i]) {
      i++;
      continue;
    }
    dirty[i] = false;
    const shape = opts.memo === false ? undefined : plainShape(run);
    let decision = shape === undefined ? undefined : waits.get(shape);
    if (!decision) {
      decision = decide(state, run);
      if (opts.stats) opts.stats.evaluated++;
      if (shape !== undefined && decision.kind === 'wait') waits.set(shape, decision);
    }
    decisions[i] = decision;
    if (decision.kind !== 'bind') {
      i++;
      continue;
    }
    bind.push({ run, pod: decision.pod });
    bindInto(state, run, decision);
    i = wakeAffinityWaiters(order, decisions, dirty, { run, pod: decision.pod }, i + 1);
  }
  const plan: Plan = { bind, wait: [], fail: [] };
  decisions.forEach((d, i) => {
    const run = order[i] as RunView;
    if (d?.kind === 'wait') plan.wait.push({ run, reason: d.reason, message: d.message });
    else if (d?.kind === 'fail') plan.fail.push({ run, reason: d.reason, message: d.message });
  });
  return plan;
}
