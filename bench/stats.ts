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
