/** Human tables and -o json|yaml output. */
import { stringify } from 'yaml';

export type Format = 'table' | 'json' | 'yaml' | 'name';

export function age(ts: string | undefined, now = Date.now()): string {
  const t = Date.parse(ts ?? '');
  if (!Number.isFinite(t)) return '<unknown>';
  const s = Math.max(0, Math.floor((now - t) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const fmt = (r: string[]): string =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('   ')
      .trimEnd();
  return [fmt(headers), ...rows.map(fmt)].join('\n') + '\n';
}

export function render(obj: unknown, format: Format, toTable: () => string, name: () => string): string {
  if (format === 'json') return `${JSON.stringify(obj, null, 2)}\n`;
  if (format === 'yaml') return stringify(obj);
  if (format === 'name') return `${name()}\n`;
  return toTable();
}

export function parseFormat(o: string | undefined): Format {
  if (o === undefined || o === 'wide') return 'table';
  if (o === 'json' || o === 'yaml' || o === 'name') return o;
  throw new Error(`--output must be json, yaml or name, got ${o}`);
}
