/** Percentiles and formatting shared by the benchmarks. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  const idx = Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1));
  return s[idx] ?? NaN;
}

export function summary(values: number[]): { p50: number; p95: number; p99: number; n: number } {
  return { p50: percentile(values, 50), p95: percentile(values, 95), p99: percentile(values, 99), n: values.length };
}

export const ms = (n: number): string => (Number.isFinite(n) ? `${n.toFixed(1)} ms` : 'n/a');
export const ratio = (a: number, b: number): string => (b > 0 ? `${(a / b).toFixed(2)}x` : 'n/a');

/** Pure: the order of the measures in round `i`: as given, or (rotate) shifted by i, so each takes every place in turn. */
export function roundOrder(names: string[], i: number, rotate: boolean): string[] {
  if (!rotate || names.length === 0) return names;
  const s = i % names.length;
  return [...names.slice(s), ...names.slice(0, s)];
}

/**
 * Sequential calls of several measures, interleaved one call each per round (after `warm` rounds),
 * so a machine's changing load weighs on all of them alike. Per measure: latencies and calls per
 * second of its own time. `rotate`: each round starts one measure later (roundOrder), so no
 * measure always follows the same one (what the one before leaves running weighs on all alike).
 */
export async function interleaved(
  n: number,
  measures: Record<string, () => Promise<unknown>>,
  warm = 20,
  rotate = false,
): Promise<Record<string, { lat: number[]; perSec: number }>> {
  const names = Object.keys(measures);
  const lat: Record<string, number[]> = Object.fromEntries(names.map((k) => [k, []]));
  for (let i = 0; i < warm + n; i++)
    for (const k of roundOrder(names, i, rotate)) {
      const t = performance.now();
      await measures[k]?.();
      if (i >= warm) lat[k]?.push(performance.now() - t);
    }
  return Object.fromEntries(
    names.map((k) => {
      const l = lat[k] ?? [];
      return [k, { lat: l, perSec: (l.length / l.reduce((a, b) => a + b, 0)) * 1000 }];
    }),
  );
}
