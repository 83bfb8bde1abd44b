/** Per-component CPU time from /proc, to attribute a benchmark's cost (Linux only). */
import { readdirSync, readFileSync } from 'node:fs';

const NAMES: [RegExp, string][] = [
  [/kube-apiserver/, 'kube-apiserver'],
  [/\/etcd /, 'etcd'],
  [/kube-controller-manager/, 'kube-controller-manager'],
  [/kube-scheduler/, 'kube-scheduler'],
  [/nodeagent\/main\.ts/, 'node-agent'],
  // The kubelet kind's node (BENCH_NODE_KIND=kubelet): the shim before containerd (its name contains it).
  [/\/kubelet /, 'kubelet'],
  [/\/containerd-shim-runc-v2 /, 'containerd-shim'],
  [/\/containerd /, 'containerd'],
  [/kruntimes\.(ts|mjs) apiserver/, 'extension-server'],
  [/kruntimes\.(ts|mjs) runtimed/, 'runtimed'],
  [/runtime-server/, 'runtime-server'],
];

/** CPU ticks per component of the processes for which `filter` holds on their own or an ancestor's
 * command line (so containers are attributed to the environment whose node agent started them). */
export function cpuTicks(filter: (cmd: string) => boolean = () => true): Map<string, number> {
  const procs = new Map<number, { cmd: string; ppid: number; ticks: number }>();
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // utime + stime, plus the reaped children's (cutime + cstime): a Run's bash counts for its Runtime Server.
      procs.set(Number(pid), {
        cmd,
        ppid: Number(f[1]),
        ticks: Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]),
      });
    } catch {
      /* process gone */
    }
  }
  const ours = (pid: number): boolean => {
    for (let p = procs.get(pid), depth = 0; p && depth < 32; p = procs.get(p.ppid), depth++)
      if (filter(p.cmd)) return true;
    return false;
  };
  const out = new Map<string, number>();
  for (const [pid, p] of procs) {
    const name = NAMES.find(([re]) => re.test(p.cmd))?.[1];
    if (name && ours(pid)) out.set(name, (out.get(name) ?? 0) + p.ticks);
  }
  return out;
}

/** CPU milliseconds per component between two samples (ticks are 10 ms). */
export function cpuDelta(before: Map<string, number>, after: Map<string, number>): string {
  return [...after.entries()]
    .map(([k, v]) => [k, (v - (before.get(k) ?? 0)) * 10] as const)
    .filter(([, v]) => v > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${v} ms`)
    .join(', ');
}

/** Total CPU milliseconds of all components between two samples. */
export function cpuTotalMs(before: Map<string, number>, after: Map<string, number>): number {
  return [...after.entries()].reduce((sum, [k, v]) => sum + Math.max(0, v - (before.get(k) ?? 0)) * 10, 0);
}

/** The pids of the processes for which `filter` holds on their own or an ancestor's command line. */
export function cpuPids(filter: (cmd: string) => boolean): number[] {
  const procs = new Map<number, { cmd: string; ppid: number }>();
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      procs.set(Number(pid), { cmd, ppid: Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) });
    } catch {
      /* process gone */
    }
  }
  const ours = (pid: number): boolean => {
    for (let p = procs.get(pid), depth = 0; p && depth < 32; p = procs.get(p.ppid), depth++)
      if (filter(p.cmd)) return true;
    return false;
  };
  return [...procs.keys()].filter(ours);
}
