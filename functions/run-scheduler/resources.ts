/** Run resource requests and Runtime Pod capacity (upstream RunSpec.ResourceRequests, runtimepod.Capacity/Fits). */
import { cmp, floor, isInteger, parseQuantity, rat, type Rat } from '../../lib/kube/quantity.ts';
import { CAPACITY_ANNOTATION_PREFIX, DEFAULT_RUNS_CAPACITY, RUNS_RESOURCE } from './types.ts';

export type ParsedRequests = { ok: true; requests: Record<string, bigint> } | { ok: false; message: string };

/** Requests beyond int64 are not integers for upstream (Quantity.AsInt64 fails), so neither here. */
const MAX_INT64 = (1n << 63n) - 1n;

function requestValue(raw: string | number): bigint | undefined {
  const q = parseQuantity(raw);
  if (!q || q.n < 0n || !isInteger(q) || q.n > MAX_INT64) return undefined;
  return q.n;
}

/**
 * Upstream RunSpec.ResourceRequests(): positive integer requests are kept, zero requests are
 * dropped, a negative, non-integer or unparseable quantity is an error (the scheduler fails the
 * Run with reason InvalidResources), and `runs` is forced to 1 when missing or zero. Resource
 * names are checked in sorted order so the reported name is deterministic.
 */
export function parseRequests(raw: Record<string, string | number> | undefined): ParsedRequests {
  const entries: [string, bigint][] = [];
  for (const name of Object.keys(raw ?? {}).sort()) {
    const value = requestValue((raw ?? {})[name] ?? '');
    if (value === undefined) return { ok: false, message: `resource request "${name}" must be a non-negative integer` };
    if (value > 0n) entries.push([name, value]);
  }
  if (!entries.some(([name]) => name === RUNS_RESOURCE)) entries.push([RUNS_RESOURCE, 1n]);
  entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return { ok: true, requests: Object.fromEntries(entries) };
}

/**
 * Exact capacity vector of a Runtime Pod: default {runs: 2} overlaid with every parseable
 * positive `kruntimes.io/capacity.<name>` annotation (fractional values are kept exactly).
 */
export function podCapacityExact(annotations: Record<string, string> | undefined): Map<string, Rat> {
  const capacity = new Map<string, Rat>([[RUNS_RESOURCE, rat(DEFAULT_RUNS_CAPACITY)]]);
  for (const [key, raw] of Object.entries(annotations ?? {})) {
    if (!key.startsWith(CAPACITY_ANNOTATION_PREFIX)) continue;
    const name = key.slice(CAPACITY_ANNOTATION_PREFIX.length);
    const q = typeof raw === 'string' ? parseQuantity(raw) : undefined;
    if (name === '' || !q || q.n <= 0n) continue;
    capacity.set(name, q);
  }
  return capacity;
}

/**
 * Integer capacity vector of a Runtime Pod (default {runs: 2} overlaid with positive
 * `kruntimes.io/capacity.<name>` annotations). A fractional capacity is floored: requests are
 * integers, so `usage + request ≤ floor(capacity)` ⇔ `usage + request ≤ capacity`.
 */
export function podCapacity(annotations: Record<string, string> | undefined): Record<string, bigint> {
  const entries = [...podCapacityExact(annotations)].map(([name, q]): [string, bigint] => [name, floor(q)]);
  return Object.fromEntries(entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

export type Usage = Map<string, bigint>;

/**
 * Upstream runtimepod.Fits: every positively requested resource must be advertised and
 * usage + request must not exceed capacity. An unadvertised requested resource is infeasible.
 */
export function fits(capacity: Map<string, Rat>, usage: Usage | undefined, request: Map<string, bigint>): boolean {
  for (const [name, requested] of request) {
    if (requested <= 0n) continue;
    const available = capacity.get(name);
    if (!available) return false;
    if (cmp(rat((usage?.get(name) ?? 0n) + requested), available) > 0) return false;
  }
  return true;
}

/** Adds request into usage (mutates usage). */
export function addUsage(usage: Usage, request: Map<string, bigint>): void {
  for (const [name, value] of request) usage.set(name, (usage.get(name) ?? 0n) + value);
}

/** "example.com/gpu=1, runs=1" (sorted by name) for waiting messages. */
export function formatRequests(request: Map<string, bigint>): string {
  return [...request]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([n, v]) => `${n}=${v}`)
    .join(', ');
}

export function requestMap(requests: Record<string, bigint>): Map<string, bigint> {
  return new Map(Object.entries(requests));
}
