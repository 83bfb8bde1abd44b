/**
 * Heap snapshot comparison (bench tool): objects per constructor (count, self size) in two V8 heap
 * snapshots, largest growth first, and how many strings contain a given text (e.g. the soak's
 * namespace, to see whether anything still holds its objects).
 *   npx tsx bench/soak/heap-summary.ts before.heapsnapshot after.heapsnapshot [--grep soak-123]
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

export interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: (string[] | string)[] } };
  nodes: number[];
  strings: string[];
}

export interface Group {
  key: string;
  count: number;
  bytes: number;
}

/** Objects grouped by "type:name" (constructor name for objects, the type for strings and code). */
export function groups(s: Snapshot): Map<string, Group> {
  const f = s.snapshot.meta.node_fields;
  const types = s.snapshot.meta.node_types[0] as string[];
  const [iType, iName, iSize] = [f.indexOf('type'), f.indexOf('name'), f.indexOf('self_size')];
  const out = new Map<string, Group>();
  for (let i = 0; i < s.nodes.length; i += f.length) {
    const type = types[s.nodes[i + iType]!] ?? '?';
    const named = type === 'object' || type === 'closure' || type === 'native';
    const key = named ? `${type}:${s.strings[s.nodes[i + iName]!] ?? '?'}` : type;
    const g = out.get(key) ?? { key, count: 0, bytes: 0 };
    g.count += 1;
    g.bytes += s.nodes[i + iSize]!;
    out.set(key, g);
  }
  return out;
}

/** Per group: after minus before, largest byte growth first. */
export function growth(before: Map<string, Group>, after: Map<string, Group>): Group[] {
  const keys = new Set([...before.keys(), ...after.keys()]);
  return [...keys]
    .map((key) => ({
      key,
      count: (after.get(key)?.count ?? 0) - (before.get(key)?.count ?? 0),
      bytes: (after.get(key)?.bytes ?? 0) - (before.get(key)?.bytes ?? 0),
    }))
    .sort((a, b) => b.bytes - a.bytes);
}

/** String nodes whose text contains `text`. */
export function stringsContaining(s: Snapshot, text: string): number {
  const f = s.snapshot.meta.node_fields;
  const types = s.snapshot.meta.node_types[0] as string[];
  const [iType, iName] = [f.indexOf('type'), f.indexOf('name')];
  let n = 0;
  for (let i = 0; i < s.nodes.length; i += f.length) {
    const type = types[s.nodes[i + iType]!];
    if (
      (type === 'string' || type === 'concatenated string' || type === 'sliced string') &&
      s.strings[s.nodes[i + iName]!]?.includes(text)
    )
      n++;
  }
  return n;
}

function main(): void {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { grep: { type: 'string' } } });
  const [a, b] = positionals.map((p) => JSON.parse(readFileSync(p, 'utf8')) as Snapshot);
  if (!a || !b) throw new Error('usage: heap-summary.ts before.heapsnapshot after.heapsnapshot [--grep text]');
  const total = (g: Map<string, Group>): number => [...g.values()].reduce((n, x) => n + x.bytes, 0);
  const [ga, gb] = [groups(a), groups(b)];
  const mb = (n: number): string => (n / 1024 / 1024).toFixed(2);
  process.stdout.write(`self size total: ${mb(total(ga))} MB -> ${mb(total(gb))} MB\n`);
  for (const g of growth(ga, gb).slice(0, 30))
    process.stdout.write(`${mb(g.bytes).padStart(8)} MB ${String(g.count).padStart(8)}  ${g.key}\n`);
  if (values.grep)
    process.stdout.write(
      `strings containing ${values.grep}: ${stringsContaining(a, values.grep)} -> ${stringsContaining(b, values.grep)}\n`,
    );
}

if (process.argv[1]?.endsWith('heap-summary.ts')) main();
