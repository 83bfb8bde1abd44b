/**
 * The soak's two seeded plans (pure): the load (what to submit when) and the faults (what to
 * break when, and how). Same seed, same plans: a run that found a defect can be replayed.
 */

/** mulberry32: a small, fast, seedable PRNG returning floats in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const LOAD_KINDS = [
  'task-short',
  'task-medium',
  'task-long',
  'workflow',
  'job-k8s',
  'job-os',
  'log-follow',
  'session-op',
] as const;
export type LoadKind = (typeof LOAD_KINDS)[number];

export const FAULT_TARGETS = [
  'runtimed',
  'runtime-server',
  'extension-server',
  'node-agent',
  'kube-apiserver',
  'etcd',
  'runtime-pod',
] as const;
export type FaultTarget = (typeof FAULT_TARGETS)[number];
/** kill: SIGKILL (or delete, for a Runtime Pod); pause: SIGSTOP, then SIGCONT after pauseMs (a partition). */
export type FaultAction = 'kill' | 'pause';

export interface LoadItem {
  atMs: number;
  kind: LoadKind;
  /** A DNS-1123 name unique within the soak. */
  name: string;
}

export interface Fault {
  atMs: number;
  target: FaultTarget;
  action: FaultAction;
  pauseMs: number;
}

export interface LoadPlanOptions {
  seed: number;
  durationMs: number;
  /** Items per second (all kinds together). */
  rate: number;
  /** Upper bound on the items submitted, whatever the duration and rate. */
  maxItems: number;
  /** Relative weight of each kind; kinds left out are not submitted. */
  weights: Partial<Record<LoadKind, number>>;
}

/** Evenly spaced submissions (a steady load) whose kinds are drawn by weight. */
export function loadPlan(o: LoadPlanOptions): LoadItem[] {
  if (!(o.rate > 0)) throw new Error(`rate must be positive, got ${o.rate}`);
  const kinds = LOAD_KINDS.filter((k) => (o.weights[k] ?? 0) > 0);
  if (kinds.length === 0) throw new Error('no load kind has a positive weight');
  const total = kinds.reduce((s, k) => s + (o.weights[k] ?? 0), 0);
  const rnd = prng(o.seed);
  const n = Math.min(o.maxItems, Math.floor((o.durationMs / 1000) * o.rate));
  const out: LoadItem[] = [];
  for (let i = 0; i < n; i++) {
    let x = rnd() * total;
    let kind = kinds[kinds.length - 1]!;
    for (const k of kinds) {
      x -= o.weights[k] ?? 0;
      if (x < 0) {
        kind = k;
        break;
      }
    }
    out.push({ atMs: Math.round((i * 1000) / o.rate), kind, name: `${kind}-${i}` });
  }
  return out;
}

export interface FaultPlanOptions {
  seed: number;
  durationMs: number;
  /** Mean time between faults (exponential gaps). */
  meanGapMs: number;
  /** No fault before this (a fault-free baseline for latencies) nor after durationMs - quietTailMs. */
  quietHeadMs: number;
  quietTailMs: number;
  targets: readonly FaultTarget[];
  /** Share of faults that pause instead of kill (Runtime Pods are always deleted). */
  pauseShare: number;
  pauseMs: [number, number];
}

/** Faults at exponentially distributed gaps, each target in turn shuffled, so every kind occurs. */
export function faultPlan(o: FaultPlanOptions): Fault[] {
  if (o.targets.length === 0) return [];
  if (!(o.meanGapMs > 0)) throw new Error(`meanGapMs must be positive, got ${o.meanGapMs}`);
  const rnd = prng(o.seed ^ 0x5eed);
  const out: Fault[] = [];
  let bag: FaultTarget[] = [];
  let t = o.quietHeadMs;
  for (;;) {
    t += Math.max(1000, Math.round(-Math.log(1 - rnd()) * o.meanGapMs));
    if (t > o.durationMs - o.quietTailMs) return out;
    if (bag.length === 0) bag = shuffle([...o.targets], rnd);
    const target = bag.pop()!;
    const pause = target !== 'runtime-pod' && rnd() < o.pauseShare;
    const [lo, hi] = o.pauseMs;
    out.push({
      atMs: t,
      target,
      action: pause ? 'pause' : 'kill',
      pauseMs: pause ? Math.round(lo + rnd() * (hi - lo)) : 0,
    });
  }
}

function shuffle<T>(xs: T[], rnd: () => number): T[] {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [xs[i], xs[j]] = [xs[j]!, xs[i]!];
  }
  return xs;
}
