/** Go-style durations ("1m30s", "500ms") as used by metav1.Duration fields. */
const UNITS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

export function parseDuration(s: string | undefined): number | undefined {
  if (s === undefined || s === '') return undefined;
  if (s === '0') return 0;
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/gy;
  let total = 0;
  let pos = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(s))) {
    total += Number(m[1]) * (UNITS[m[2] ?? ''] ?? NaN);
    pos = re.lastIndex;
  }
  if (pos !== s.length || pos === 0 || !Number.isFinite(total)) return undefined;
  return total;
}

/** Formats like Go's time.Duration.String() for whole milliseconds ("1m30s", "500ms", "2h0m0s"). */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  if (ms < 1000) return `${ms}ms`;
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = (ms % 60_000) / 1000;
  const sec = `${Number.isInteger(s) ? s : s.toFixed(3).replace(/0+$/, '')}s`;
  if (h) return `${h}h${m}m${sec}`;
  if (m) return `${m}m${sec}`;
  return sec;
}
