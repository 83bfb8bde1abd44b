/** The soak's fault injector: one fault at a time, each followed by a canary Run that measures recovery. */
import type { KubeClient } from '../../lib/kube/client.ts';
import { restartComponent, type Component } from '../../localenv/environment.ts';
import type { FaultRecord } from './accounting.ts';
import type { Fault } from './schedule.ts';
import { alive, componentPid, podPids, podsOf, signal } from './procs.ts';
import { RUNTIME } from './workload.ts';

export interface InjectorContext {
  api: KubeClient;
  root: string;
  ns: string;
  rnd: () => number;
  log: (m: string) => void;
  /** Submits a canary and resolves when one Succeeded (the platform serves again). */
  canary: () => Promise<void>;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const CONTROL: Partial<Record<Fault['target'], Component>> = {
  'node-agent': 'node-agent',
  'kube-apiserver': 'kube-apiserver',
  etcd: 'etcd',
};

/** The pids a fault hits (control plane from the environment's state, the rest from the node agent's records). */
async function targetPids(c: InjectorContext, f: Fault): Promise<number[]> {
  const comp = CONTROL[f.target];
  if (comp) return [componentPid(c.root, comp) ?? 0].filter(Boolean);
  if (f.target === 'extension-server') {
    const pods = await podsOf(c.api, 'kruntimes-system', 'app.kubernetes.io/name=kruntimes-extension');
    return pods.flatMap((p) => Object.values(podPids(c.root, p)));
  }
  const pods = await podsOf(c.api, c.ns, `runtime=${RUNTIME}`);
  const pod = pods[Math.floor(c.rnd() * pods.length)];
  if (!pod) return [];
  const pid = podPids(c.root, pod)[f.target === 'runtimed' ? 'runtimed' : 'runtime'];
  return pid ? [pid] : [];
}

async function gone(pids: number[]): Promise<void> {
  const end = Date.now() + 15_000;
  while (pids.some(alive) && Date.now() < end) await sleep(50);
  if (pids.some(alive)) throw new Error(`pids ${pids.join(',')} still alive 15 s after SIGKILL`);
}

async function deleteRuntimePod(c: InjectorContext): Promise<string> {
  const pods = await podsOf(c.api, c.ns, `runtime=${RUNTIME}`);
  const pod = pods[Math.floor(c.rnd() * pods.length)];
  if (!pod) return 'no Runtime Pod to delete';
  await c.api.delete(`/api/v1/namespaces/${c.ns}/pods/${pod.metadata.name}`, { gracePeriodSeconds: 0 });
  return `deleted ${pod.metadata.name}`;
}

/** Applies one fault and waits for recovery (a canary Run Succeeded); restarts what nothing else restarts. */
export async function inject(c: InjectorContext, f: Fault): Promise<FaultRecord> {
  const rec: FaultRecord = { target: f.target, action: f.action, atMs: f.atMs, startedAt: Date.now() };
  try {
    if (f.target === 'runtime-pod') {
      c.log(`fault ${f.target}: ${await deleteRuntimePod(c)}`);
    } else {
      const pids = await targetPids(c, f);
      if (pids.length === 0) throw new Error('no process found');
      c.log(
        `fault ${f.target} ${f.action} pids ${pids.join(',')}${f.action === 'pause' ? ` for ${f.pauseMs} ms` : ''}`,
      );
      if (f.action === 'pause') {
        for (const p of pids) signal(p, 'SIGSTOP');
        await sleep(f.pauseMs);
        for (const p of pids) signal(p, 'SIGCONT');
      } else {
        for (const p of pids) signal(p, 'SIGKILL');
        const comp = CONTROL[f.target];
        // Nothing supervises the local environment's processes: the harness starts them again.
        if (comp) {
          // Until the parent reaps it, a killed child still answers kill(pid, 0): wait for it to be gone.
          await gone(pids);
          await restartComponent(c.root, comp);
        }
      }
    }
    await c.canary();
    rec.recoveredAt = Date.now();
    c.log(`fault ${f.target} ${f.action}: recovered in ${rec.recoveredAt - rec.startedAt} ms`);
  } catch (err) {
    rec.error = err instanceof Error ? err.message : String(err);
    c.log(`fault ${f.target} ${f.action}: ${rec.error}`);
  }
  return rec;
}
