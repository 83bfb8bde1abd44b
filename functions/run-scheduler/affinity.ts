/**
 * Run affinity (upstream internal/scheduler/affinity.go) generalised to Node topology keys.
 *
 * A target is an active Run (or one bound earlier in the same batch). Its topology domain for
 * `kruntimes.io/runtime-pod` is its assigned Pod name; for a Node key it is that label on the
 * assigned Pod's Node. A Pod whose Node lacks the label is in no domain for that key: required
 * affinity cannot be satisfied there and required anti-affinity does not exclude it.
 */
import { matchesSelector, validateSelector } from '../../lib/kube/selector.ts';
import {
  TOPOLOGY_KEYS,
  TOPOLOGY_RUNTIME_POD,
  type LabelSelector,
  type RunAffinityRules,
  type RunAffinityTerm,
  type RunView,
  type RuntimePod,
} from './types.ts';

/** A Run that counts for affinity: where it runs and which labels it has. */
export interface AffinityTarget {
  uid: string;
  namespace: string;
  podName: string;
  labels: Record<string, string>;
}

export interface AffinityRule {
  selector: LabelSelector;
  topologyKey: string;
  weight: number;
  /** Domains holding at least one matching target. */
  domains: Set<string>;
  /** Matching targets anywhere (also those whose domain is unknown). */
  matches: number;
  /** Bootstrap: a required affinity term with no matching target that the Run's own labels match. */
  seedable: boolean;
}

export interface CompiledAffinity {
  required: AffinityRule[];
  requiredAnti: AffinityRule[];
  preferred: AffinityRule[];
  preferredAnti: AffinityRule[];
}

export type AffinityVerdict = 'ok' | 'UnsatisfiedRunAffinity' | 'UnsatisfiedRunAntiAffinity';

/** Topology value of a Pod for a key, or undefined when the Pod is in no domain for it. */
export function topologyValue(pod: Pick<RuntimePod, 'name' | 'nodeLabels'>, key: string): string | undefined {
  if (key === TOPOLOGY_RUNTIME_POD) return pod.name;
  const labels = pod.nodeLabels;
  return labels && Object.hasOwn(labels, key) ? labels[key] : undefined;
}

function targetDomain(target: AffinityTarget, key: string, pods: Map<string, RuntimePod>): string | undefined {
  if (key === TOPOLOGY_RUNTIME_POD) return target.podName;
  const pod = pods.get(target.podName);
  return pod ? topologyValue(pod, key) : undefined;
}

function termProblem(term: RunAffinityTerm | undefined): string | undefined {
  if (!term || typeof term !== 'object') return 'run affinity term is empty';
  if (!TOPOLOGY_KEYS.includes(term.topologyKey))
    return `unsupported run affinity topology key ${JSON.stringify(term.topologyKey)}`;
  const problem = validateSelector(term.labelSelector);
  return problem === undefined ? undefined : `parse run affinity selector: ${problem}`;
}

interface BuildContext {
  run: RunView;
  targets: AffinityTarget[];
  pods: Map<string, RuntimePod>;
}

function buildRule(ctx: BuildContext, term: RunAffinityTerm, weight: number, allowSeed: boolean): AffinityRule {
  const domains = new Set<string>();
  let matches = 0;
  for (const target of ctx.targets) {
    if (target.uid === ctx.run.uid || target.namespace !== ctx.run.namespace) continue;
    if (!matchesSelector(term.labelSelector, target.labels)) continue;
    matches++;
    const domain = targetDomain(target, term.topologyKey, ctx.pods);
    if (domain !== undefined) domains.add(domain);
  }
  const seedable = allowSeed && matches === 0 && matchesSelector(term.labelSelector, ctx.run.labels);
  return { selector: term.labelSelector, topologyKey: term.topologyKey, weight, domains, matches, seedable };
}

function compileRules(
  ctx: BuildContext,
  rules: RunAffinityRules | undefined,
  anti: boolean,
): { required: AffinityRule[]; preferred: AffinityRule[] } | string {
  const required: AffinityRule[] = [];
  const preferred: AffinityRule[] = [];
  for (const term of rules?.requiredDuringSchedulingIgnoredDuringExecution ?? []) {
    const problem = termProblem(term);
    if (problem) return problem;
    required.push(buildRule(ctx, term, 0, !anti));
  }
  for (const weighted of rules?.preferredDuringSchedulingIgnoredDuringExecution ?? []) {
    const weight = weighted?.weight;
    if (!Number.isInteger(weight) || weight < 1 || weight > 100)
      return `run affinity weight ${String(weight)} must be an integer between 1 and 100`;
    const problem = termProblem(weighted.runAffinityTerm);
    if (problem) return problem;
    preferred.push(buildRule(ctx, weighted.runAffinityTerm, weight, false));
  }
  return { required, preferred };
}

/**
 * Compiles the Run's affinity against the current targets (the Run itself is never a target;
 * targets from other namespaces are ignored). Returns an error string for terms upstream could
 * not compile (unsupported topology key, invalid selector), which fails the Run.
 */
export function compileAffinity(
  run: RunView,
  targets: AffinityTarget[],
  pods: Map<string, RuntimePod>,
): CompiledAffinity | string {
  const ctx: BuildContext = { run, targets, pods };
  const affinity = compileRules(ctx, run.affinity?.runAffinity, false);
  if (typeof affinity === 'string') return affinity;
  const anti = compileRules(ctx, run.affinity?.runAntiAffinity, true);
  if (typeof anti === 'string') return anti;
  return {
    required: affinity.required,
    preferred: affinity.preferred,
    requiredAnti: anti.required,
    preferredAnti: anti.preferred,
  };
}

function holdsMatch(rule: AffinityRule, pod: RuntimePod): boolean {
  const domain = topologyValue(pod, rule.topologyKey);
  return domain !== undefined && rule.domains.has(domain);
}

/** Required affinity, then required anti-affinity, for one candidate Pod. */
export function affinityVerdict(affinity: CompiledAffinity, pod: RuntimePod): AffinityVerdict {
  for (const rule of affinity.required) {
    if (topologyValue(pod, rule.topologyKey) === undefined) return 'UnsatisfiedRunAffinity';
    if (!rule.seedable && !holdsMatch(rule, pod)) return 'UnsatisfiedRunAffinity';
  }
  for (const rule of affinity.requiredAnti) {
    if (holdsMatch(rule, pod)) return 'UnsatisfiedRunAntiAffinity';
  }
  return 'ok';
}

/** Raw PreferredRunAffinity score: weights of matching preferred terms plus non-matching preferred anti terms. */
export function preferredScore(affinity: CompiledAffinity, pod: RuntimePod): number {
  let score = 0;
  for (const rule of affinity.preferred) if (holdsMatch(rule, pod)) score += rule.weight;
  for (const rule of affinity.preferredAnti) if (!holdsMatch(rule, pod)) score += rule.weight;
  return score;
}
