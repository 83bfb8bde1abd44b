/**
 * Score plugins (upstream score.go, score_affinity.go, strategy_leastloaded.go): each plugin
 * yields 0..100 per feasible Pod with weight 1; Pods rank by total descending, then by name
 * (then UID, for duplicate names) ascending. All arithmetic is exact (integers and rationals).
 */
import { preferredScore, type CompiledAffinity } from './affinity.ts';
import { add, cmp, div, rat, ZERO, type Rat } from '../../lib/kube/quantity.ts';
import type { Usage } from './resources.ts';
import type { RuntimePod } from './types.ts';

export const MAX_POD_SCORE = 100;

export interface Candidate {
  pod: RuntimePod;
  capacity: Map<string, Rat>;
  usage: Usage | undefined;
}
export interface ScoredPod {
  pod: RuntimePod;
  preferredAffinity: number;
  leastLoaded: number;
  total: number;
}

/** Exact integer floor(a * 100 / b) for non-negative safe integers a and positive b. */
function scaleTo100(a: number, b: number): number {
  return Number((BigInt(a) * BigInt(MAX_POD_SCORE)) / BigInt(b));
}

/** PreferredRunAffinity normalized by the maximum raw score (all-zero stays zero). */
export function normalizeByMaximum(raw: number[]): number[] {
  const max = raw.reduce((m, x) => Math.max(m, x), 0);
  return max === 0 ? raw.map(() => 0) : raw.map((x) => scaleTo100(x, max));
}

/** Projected utilization after placing the request: (max_r u_r, Σ_r u_r), u_r = (usage_r + request_r) / capacity_r. */
export interface LoadKey {
  max: Rat;
  sum: Rat;
}

export function loadKey(capacity: Map<string, Rat>, usage: Usage | undefined, request: Map<string, bigint>): LoadKey {
  let max = ZERO;
  let sum = ZERO;
  for (const [name, available] of capacity) {
    if (available.n <= 0n) continue;
    const used = (usage?.get(name) ?? 0n) + (request.get(name) ?? 0n);
    if (used <= 0n) continue;
    const u = div(rat(used), available);
    if (cmp(u, max) > 0) max = u;
    sum = add(sum, u);
  }
  return { max, sum };
}

export function compareLoad(a: LoadKey, b: LoadKey): number {
  return cmp(a.max, b.max) || cmp(a.sum, b.sum);
}

/**
 * LeastLoaded: candidates sorted by load key ascending; equal keys form a group scored
 * (n − 1 − groupStart) × 100 / (n − 1); a single candidate scores 100.
 */
export function leastLoadedScores(keys: LoadKey[]): number[] {
  const n = keys.length;
  if (n === 1) return [MAX_POD_SCORE];
  const order = keys.map((_, i) => i).sort((i, j) => compareLoad(keys[i] as LoadKey, keys[j] as LoadKey));
  const scores = new Array<number>(n).fill(0);
  let start = 0;
  for (let k = 0; k < n; k++) {
    const index = order[k] as number;
    if (k > 0 && compareLoad(keys[index] as LoadKey, keys[order[k - 1] as number] as LoadKey) !== 0) start = k;
    scores[index] = scaleTo100(n - 1 - start, n - 1);
  }
  return scores;
}

function byRank(a: ScoredPod, b: ScoredPod): number {
  if (a.total !== b.total) return b.total - a.total;
  if (a.pod.name !== b.pod.name) return a.pod.name < b.pod.name ? -1 : 1;
  return a.pod.uid < b.pod.uid ? -1 : a.pod.uid > b.pod.uid ? 1 : 0;
}

/** Scores every feasible candidate and returns them best first. */
export function rankCandidates(
  candidates: Candidate[],
  affinity: CompiledAffinity,
  request: Map<string, bigint>,
): ScoredPod[] {
  const preferred = normalizeByMaximum(candidates.map((c) => preferredScore(affinity, c.pod)));
  const least = leastLoadedScores(candidates.map((c) => loadKey(c.capacity, c.usage, request)));
  const scored = candidates.map((c, i): ScoredPod => {
    const p = preferred[i] ?? 0;
    const l = least[i] ?? 0;
    return { pod: c.pod, preferredAffinity: p, leastLoaded: l, total: p + l };
  });
  return scored.sort(byRank);
}
