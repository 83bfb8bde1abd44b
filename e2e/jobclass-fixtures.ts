/**
 * Shared fixtures of the JobClass e2e specs (jobclass.e2e.ts, jobclass-matrix.e2e.ts): typed
 * access to Jobs, JobClasses and parameters objects on the real cluster, waiting on their
 * conditions, Events, and gate files that let a Job's container run until the test releases it.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isApiError } from '../lib/kube/errors.ts';
import { E2E_ROOT } from './cluster.ts';
import { admin, eventually, type Obj } from './helpers.ts';

export const G = 'execution.ayatori.ddupan.top';
export const X = `/apis/${G}/v1alpha1`;
export const API_VERSION = `${G}/v1alpha1`;
export const KUBERNETES = `${G}/kubernetes`;
export const OPENSANDBOX = `${G}/opensandbox`;
export const DEFAULT_CLASS = `${G}/is-default-job-class`;
export const NAMESPACE_DEFAULT = `${G}/default-job-class`;
export const JOB_UID_LABEL = `${G}/job-uid`;

export type Cond = { type: string; status: string; reason: string; message: string; lastTransitionTime?: string };
export type Job = Obj & {
  status?: {
    phase?: string;
    message?: string;
    conditions?: Cond[];
    resolvedJobClass?: { name: string; uid: string; controllerName: string; parametersRef?: { uid?: string } };
    effectiveResources?: Record<string, Record<string, string>>;
    execution?: { name?: string; sandboxID?: string; endpoint?: string; createIntent?: { outcome?: string } };
  };
};
export type ClassObj = Obj & { status?: { conditions?: Cond[] } };
export type Event = Obj & {
  reason: string;
  message: string;
  type: string;
  involvedObject: { uid?: string; kind?: string; name?: string };
};
export type BatchJob = Obj & {
  spec: {
    template: {
      spec: {
        serviceAccountName: string;
        runtimeClassName?: string;
        containers: { resources?: Record<string, Record<string, string>> }[];
      };
    };
  };
};

export const cond = (o: { status?: { conditions?: Cond[] } }, t: string): Cond | undefined =>
  o.status?.conditions?.find((c) => c.type === t);
export const uniq = `${process.pid}`;

/** Creates an object, tolerating one that already exists. */
export async function apply(path: string, obj: Record<string, unknown>): Promise<void> {
  await admin()
    .create(path, obj)
    .catch((e: unknown) => {
      if (!isApiError(e, 409)) throw e;
    });
}
export async function job(ns: string, name: string, spec: Record<string, unknown>): Promise<void> {
  await admin().create(`${X}/namespaces/${ns}/jobs`, {
    apiVersion: API_VERSION,
    kind: 'Job',
    metadata: { name },
    spec,
  });
}
export const getJob = (ns: string, name: string): Promise<Job> =>
  admin().get<Job>(`${X}/namespaces/${ns}/jobs/${name}`);
export async function until(
  ns: string,
  name: string,
  pred: (j: Job) => boolean,
  what: string,
  timeoutMs = 60_000,
): Promise<Job> {
  return eventually(
    `Job ${name}: ${what}`,
    async () => {
      const j = await getJob(ns, name);
      return pred(j) ? j : undefined;
    },
    timeoutMs,
  );
}
/** Waits until the Job has the condition with this reason (and status, when given). */
export const untilReason = (ns: string, name: string, type: string, reason: string, status?: string): Promise<Job> =>
  until(
    ns,
    name,
    (j) => cond(j, type)?.reason === reason && (status === undefined || cond(j, type)?.status === status),
    `${type}${status ? `=${status}` : ''}/${reason}`,
  );

export function kubernetesClass(
  name: string,
  params: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  const meta = (extra.metadata ?? {}) as Record<string, unknown>;
  const spec = (extra.spec ?? {}) as Record<string, unknown>;
  return {
    apiVersion: API_VERSION,
    kind: 'JobClass',
    metadata: { name, ...meta },
    spec: {
      controllerName: KUBERNETES,
      parametersRef: { group: G, kind: 'KubernetesExecutionParameters', name: params },
      ...spec,
    },
  };
}
export function kubernetesParams(name: string, spec: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: API_VERSION,
    kind: 'KubernetesExecutionParameters',
    metadata: { name },
    spec: { serviceAccountName: 'jobs-runner', ...spec },
  };
}
export const getClass = (name: string): Promise<ClassObj> => admin().get<ClassObj>(`${X}/jobclasses/${name}`);
/** Waits until the class condition has this reason (and status, when given). */
export async function classUntil(
  name: string,
  type: string,
  reason: string,
  status?: string,
  timeoutMs = 60_000,
): Promise<ClassObj> {
  return eventually(
    `JobClass ${name}: ${type}/${reason}`,
    async () => {
      const c = await getClass(name);
      const x = cond(c, type);
      return x?.reason === reason && (status === undefined || x.status === status) ? c : undefined;
    },
    timeoutMs,
  );
}
export const classReady = (name: string, timeoutMs = 60_000): Promise<ClassObj> =>
  classUntil(name, 'Ready', 'BackendReachable', 'True', timeoutMs);

/** A Kubernetes-adapter class with its parameters `<name>-params` (created unless they exist), Ready. */
export async function readyKubernetesClass(
  name: string,
  params: Record<string, unknown> = {},
  classExtra: Record<string, unknown> = {},
): Promise<ClassObj> {
  await apply(`${X}/kubernetesexecutionparameters`, kubernetesParams(`${name}-params`, params));
  await admin().create(`${X}/jobclasses`, kubernetesClass(name, `${name}-params`, classExtra));
  return classReady(name);
}

export async function serviceAccount(ns: string, name = 'jobs-runner'): Promise<void> {
  await admin().create(`/api/v1/namespaces/${ns}/serviceaccounts`, {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: { name },
  });
}

/** Events about one object (cluster-scoped objects report into `default`). */
export async function eventsOf(uid: string | undefined, ns = 'default'): Promise<Event[]> {
  return (await admin().list<Event>(`/api/v1/namespaces/${ns}/events`)).items.filter(
    (e) => e.involvedObject.uid === uid,
  );
}
export async function eventually404(what: string, path: string, timeoutMs = 60_000): Promise<void> {
  await eventually(
    what,
    async () => {
      try {
        await admin().get(path);
        return false;
      } catch (e) {
        if (isApiError(e, 404)) return true;
        throw e;
      }
    },
    timeoutMs,
  );
}

/** The batch/v1 Jobs and Pods the Kubernetes adapter made for an Ayatori Job UID. */
export async function executionsOf(
  ns: string,
  uid: string | undefined,
): Promise<{ batchJobs: BatchJob[]; pods: Obj[] }> {
  const q = { labelSelector: `${JOB_UID_LABEL}=${uid ?? ''}` };
  const [b, p] = await Promise.all([
    admin().list<BatchJob>(`/apis/batch/v1/namespaces/${ns}/jobs`, q),
    admin().list<Obj>(`/api/v1/namespaces/${ns}/pods`, q),
  ]);
  return { batchJobs: b.items, pods: p.items };
}

/** Administrator recovery: removes every finalizer so a blocked cluster-scoped object goes away. */
export async function forceRemove(path: string): Promise<void> {
  await admin()
    .patch(path, { metadata: { finalizers: null } })
    .catch((e: unknown) => {
      if (!isApiError(e, 404)) throw e;
    });
  await eventually404(`${path} gone`, path);
}

/** Best-effort cleanup of cluster-scoped objects (finalizers removed: their Jobs are gone with the namespaces). */
export async function cleanup(paths: string[]): Promise<void> {
  for (const p of paths) {
    await admin()
      .delete(p)
      .catch(() => undefined);
    await admin()
      .patch(p, { metadata: { finalizers: null } })
      .catch(() => undefined);
  }
}

const GATES = join(E2E_ROOT, 'gates');
/** A gate: a container that waits for it runs until `open()` (a host file; the node agent runs host processes). */
export function gate(name: string): { command: string[]; open: () => void } {
  mkdirSync(GATES, { recursive: true });
  const file = join(GATES, `${name}-${Date.now()}`);
  return {
    command: ['bash', '-c', `while [ ! -e '${file}' ]; do sleep 0.2; done; echo released`],
    open: () => writeFileSync(file, ''),
  };
}

/** The jobclass lines of the extension API server's /metrics (its Pod serves them on :8080). */
export async function jobclassMetrics(): Promise<string[]> {
  type Pod = Obj & { status?: { podIP?: string; containerStatuses?: { ready: boolean }[] } };
  const pod = await eventually('a ready extension API server Pod', async () => {
    const pods = await admin().list<Pod>('/api/v1/namespaces/kruntimes-system/pods', {
      labelSelector: 'app.kubernetes.io/name=kruntimes-extension',
    });
    return pods.items.find((x) => x.status?.containerStatuses?.[0]?.ready && !x.metadata.deletionTimestamp);
  });
  const res = await fetch(`http://${pod.status?.podIP ?? ''}:8080/metrics`);
  return (await res.text()).split('\n').filter((l) => l.startsWith('kruntimes_jobclass_'));
}
