/** The soak's end: the namespace and cluster-scoped objects deleted, nothing stuck, nothing left running. */
import { GIVE_UP_MS } from '../../functions/run-artifact-gc/index.ts';
import { isApiError } from '../../lib/kube/errors.ts';
import { containerPids, podPids, processStart, stillRunning, type PodLite } from './procs.ts';
import { G, teardownJobClasses, until, X, type Obj, type Workload } from './workload.ts';

/** How long a namespace may take to go: the bound within which run-artifact-gc releases every Run, and 2 minutes. */
export const NAMESPACE_DELETE_BOUND_MS = GIVE_UP_MS + 120_000;

const KINDS = [
  `${G}/namespaces/NS/runs`,
  `${G}/namespaces/NS/workflowruns`,
  `${G}/namespaces/NS/persistentworkspaces`,
  `${X}/namespaces/NS/jobs`,
  '/api/v1/namespaces/NS/pods',
];

async function leftovers(w: Workload): Promise<string[]> {
  const out: string[] = [];
  for (const k of KINDS) {
    const l = await w.api.list<Obj>(k.replace('NS', w.ns)).catch(() => ({ items: [] as Obj[] }));
    for (const o of l.items)
      out.push(
        `${k.split('/').pop()}/${o.metadata.name} finalizers [${(o.metadata.finalizers ?? []).join(',')}]${o.metadata.deletionTimestamp ? ' deleting' : ''}`,
      );
  }
  return out;
}

export async function finalCheck(
  w: Workload,
  log: (m: string) => void,
): Promise<{ stuck: string[]; orphans: string[] }> {
  const pods = await until('list pods', () => w.api.list<PodLite>(`/api/v1/namespaces/${w.ns}/pods`), 60_000);
  // The processes running now, each by pid and start time: a finished container's pid file
  // names a pid the machine may since have given to another process.
  const pids = pods.items.flatMap((p) =>
    Object.entries(containerPids(p, podPids(w.root, p))).flatMap(([c, pid]) => {
      const start = processStart(pid);
      return start ? [{ what: `${p.metadata.name}/${c}`, pid, start }] : [];
    }),
  );
  log(`deleting namespace ${w.ns}`);
  await w.api.delete(`/api/v1/namespaces/${w.ns}`);
  await teardownJobClasses(w);
  const stuck: string[] = [];
  const t0 = Date.now();
  await until(
    `namespace ${w.ns} gone`,
    async () => {
      try {
        await w.api.get(`/api/v1/namespaces/${w.ns}`);
        return undefined;
      } catch (err) {
        return isApiError(err, 404) ? true : undefined;
      }
    },
    NAMESPACE_DELETE_BOUND_MS,
  ).then(
    () => log(`namespace ${w.ns} deleted in ${((Date.now() - t0) / 1000).toFixed(1)} s`),
    async () => {
      const bound = NAMESPACE_DELETE_BOUND_MS / 1000;
      stuck.push(`namespace ${w.ns} not deleted after ${bound} s`, ...(await leftovers(w)));
    },
  );
  const orphans = pids
    .filter(stillRunning)
    .map((p) => `process ${p.what} pid ${p.pid} alive after its namespace was deleted`);
  for (const s of w.srv?.sandboxes.values() ?? [])
    if (!['Terminated', 'Failed'].includes(s.status.state)) orphans.push(`sandbox ${s.id} ${s.status.state}`);
  return { stuck, orphans };
}
