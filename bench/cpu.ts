/** Per-component CPU time from /proc, to attribute a benchmark's cost (Linux only). */
import { readdirSync, readFileSync } from 'node:fs';

const NAMES: [RegExp, string][] = [
  [/kube-apiserver/, 'kube-apiserver'], [/\/etcd /, 'etcd'], [/kube-controller-manager/, 'kube-controller-manager'], [/kube-scheduler/, 'kube-scheduler'],
  [/nodeagent\/main\.ts/, 'node-agent'], [/kruntimes\.ts apiserver/, 'extension-server'], [/kruntimes\.ts runtimed/, 'runtimed'], [/runtime-server/, 'runtime-server'],
];

export function cpuTicks(filter: (cmd: string) => boolean = () => true): Map<string, number> {
  const out = new Map<string, number>();
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (!filter(cmd)) continue;
      const name = NAMES.find(([re]) => re.test(cmd))?.[1];
      if (!name) continue;
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(name, (out.get(name) ?? 0) + Number(f[11]) + Number(f[12]));
    } catch { /* process gone */ }
  }
  return out;
}

/** CPU milliseconds per component between two samples (ticks are 10 ms). */
export function cpuDelta(before: Map<string, number>, after: Map<string, number>): string {
  return [...after.entries()].map(([k, v]) => [k, (v - (before.get(k) ?? 0)) * 10] as const).filter(([, v]) => v > 0)
    .sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v} ms`).join(', ');
}
