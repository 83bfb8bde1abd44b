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

/**
 * Sequential calls of several measures, interleaved one call each per round (after `warm` rounds),
 * so a machine's changing load weighs on all of them alike. Per measure: latencies and calls per
 * second of its own time.
 */
export async function interleaved(
  n: number,
  measures: Record<string, () => Promise<unknown>>,
  warm = 20,
): Promise<Record<string, { lat: number[]; perSec: number }>> {
  const names = Object.keys(measures);
  const lat: Record<string, number[]> = Object.fromEntries(names.map((k) => [k, []]));
  for (let i = 0; i < warm + n; i++)
    for (const k of names) {
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
