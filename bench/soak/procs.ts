/** The soak's view of the local environment's processes: pids, signals, resident memory. */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KubeClient } from '../../lib/kube/client.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { readState, type Component } from '../../localenv/environment.ts';

export type PodLite = KubeObject & {
  spec: { nodeName?: string };
  status?: {
    conditions?: { type: string; status: string }[];
    containerStatuses?: { name: string; state?: Record<string, { startedAt?: string } | undefined> }[];
  };
};

/** How far a container's process may have started from the startedAt its status records. */
export const START_TOLERANCE_MS = 10_000;

/**
 * The pids that are still the Pod's container processes: a process whose start is far from the
 * startedAt the container's status records (running or terminated) is another process that got
 * the finished container's pid (the third 30-minute soak took a process that reused a finished
 * Job container's pid for an orphan of that Job). A container without a recorded start is kept.
 */
export function containerPids(
  pod: PodLite,
  pids: Record<string, number>,
  startedAtMs: (pid: number) => number | undefined = processStartedAtMs,
): Record<string, number> {
  const recorded = new Map(
    (pod.status?.containerStatuses ?? []).map((c) => {
      const s = c.state?.running?.startedAt ?? c.state?.terminated?.startedAt;
      return [c.name, s ? Date.parse(s) : undefined] as const;
    }),
  );
  return Object.fromEntries(
    Object.entries(pids).filter(([c, pid]) => {
      const want = recorded.get(c);
      const got = startedAtMs(pid);
      return want === undefined || got === undefined || Math.abs(got - want) <= START_TOLERANCE_MS;
    }),
  );
}

/** When a process started (epoch ms): boot time plus its start in clock ticks (100 per second). */
export function processStartedAtMs(pid: number): number | undefined {
  const ticks = processStart(pid);
  const btime = /^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'utf8'))?.[1];
  if (ticks === undefined || !btime) return undefined;
  return Number(btime) * 1000 + Number(ticks) * 10;
}

/** The pid the environment's state records for a control-plane component or the node agent. */
export function componentPid(root: string, c: Component): number | undefined {
  return readState(root)?.pids[c];
}

/** The pids of a Pod's containers on the node agent (container name -> pid). */
export function podPids(root: string, pod: PodLite): Record<string, number> {
  const dir = join(root, 'nodes', pod.spec.nodeName ?? '', 'pods', pod.metadata.uid ?? '', 'pids');
  if (!existsSync(dir)) return {};
  const out: Record<string, number> = {};
  for (const f of readdirSync(dir)) {
    const n = Number(readFileSync(join(dir, f), 'utf8').trim());
    if (n > 0) out[f] = n;
  }
  return out;
}

export async function podsOf(api: KubeClient, ns: string, selector: string): Promise<PodLite[]> {
  const l = await api.list<PodLite>(`/api/v1/namespaces/${ns}/pods`, { labelSelector: selector });
  return l.items.filter((p) => !p.metadata.deletionTimestamp);
}

export function signal(pid: number | undefined, sig: NodeJS.Signals): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false;
  }
}

/**
 * A process's start time (clock ticks since boot, /proc/<pid>/stat field 22): with the pid, what
 * tells one process from a later one that got the same pid. Undefined when there is no such process.
 */
export function processStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which is in parentheses and may itself contain spaces.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/** Whether the process that had this pid and start time still runs (not a later one with its pid). */
export function stillRunning(p: { pid: number; start: string }): boolean {
  return processStart(p.pid) === p.start;
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Resident set size of a process in MB (0 when it is gone). */
export function rssMb(pid: number | undefined): number {
  if (!pid) return 0;
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}
