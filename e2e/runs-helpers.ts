/** Helpers for Run e2e specs. */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import type { KubeObject } from '../lib/kube/types.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import { E2E_NODE_KIND, E2E_NODES, E2E_ROOT } from './cluster.ts';
import { admin, eventually, type Obj } from './helpers.ts';

export const GROUP = '/apis/kruntimes.io/v1alpha1';
export type RunObj = Obj & {
  spec: Record<string, unknown>;
  status?: {
    phase?: string;
    message?: string;
    outputs?: Record<string, string>;
    attempt?: number;
    assignedPod?: string;
    startTime?: string;
    completionTime?: string;
    conditions?: { type: string; status: string; reason: string; message: string }[];
    artifactRefs?: Record<string, unknown>[];
  };
};
type PodObj = KubeObject & {
  spec: { nodeName?: string };
  status?: {
    phase?: string;
    conditions?: { type: string; status: string }[];
    containerStatuses?: { name: string; containerID?: string }[];
  };
};

/** How many Pods a Runtime's DaemonSet (no replicas) has: one per node of the e2e cluster. */
export const PER_NODE = E2E_NODES.length;

/**
 * The host pid of a Runtime Pod's runtimed: the node agent records it; on a real kubelet it is
 * the process in the container's cgroup (its id from the Pod's status; containerd's cgroup path
 * ends in it) whose command is runtimed.
 */
export async function runtimedPid(ns: string, pod: string): Promise<number> {
  const p = await admin().get<PodObj>(`/api/v1/namespaces/${ns}/pods/${pod}`);
  if (E2E_NODE_KIND !== 'kubelet') {
    const file = join(E2E_ROOT, 'nodes', p.spec.nodeName ?? '', 'pods', p.metadata.uid ?? '', 'pids', 'runtimed');
    return Number(readFileSync(file, 'utf8').trim());
  }
  const id = p.status?.containerStatuses?.find((c) => c.name === 'runtimed')?.containerID?.split('://')[1];
  if (!id) throw new Error(`Pod ${pod} has no running runtimed container`);
  for (const d of readdirSync('/proc').filter((e) => /^\d+$/.test(e))) {
    try {
      if (!readFileSync(`/proc/${d}/cgroup`, 'utf8').includes(id)) continue;
      if (readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0').includes('runtimed')) return Number(d);
    } catch {
      // the process ended while we looked
    }
  }
  throw new Error(`no runtimed process in the cgroup of container ${id}`);
}

export function example(path: string): Record<string, unknown> {
  return parse(readFileSync(join(REPO_ROOT, path), 'utf8')) as Record<string, unknown>;
}

export async function createRuntime(ns: string, name: string, spec: Record<string, unknown>): Promise<void> {
  await admin().create(`${GROUP}/namespaces/${ns}/runtimes`, {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'Runtime',
    metadata: { name },
    spec,
  });
}

/**
 * A bash Runtime whose artifacts go to a Filesystem store on a shared PVC named `artifacts`
 * (created here), with its Pods ready.
 */
export async function filesystemStoreRuntime(
  ns: string,
  replicas: number,
  extra: Record<string, unknown> = {},
): Promise<PodObj[]> {
  await admin().create(`/api/v1/namespaces/${ns}/persistentvolumeclaims`, {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: 'artifacts' },
    spec: { accessModes: ['ReadWriteMany'], resources: { requests: { storage: '1Gi' } } },
  });
  const artifactStore = { driver: 'filesystem', filesystem: { volumeClaimName: 'artifacts' } };
  await createRuntime(ns, 'bash', bashRuntime({ replicas, ...extra, artifactStore }));
  return runtimePods(ns, 'bash', replicas);
}

export async function runtimePods(ns: string, runtime: string, count: number): Promise<PodObj[]> {
  return eventually(
    `${count} ready Runtime Pods of ${runtime}`,
    async () => {
      const pods = (
        await admin().list<PodObj>(`/api/v1/namespaces/${ns}/pods`, { labelSelector: `runtime=${runtime}` })
      ).items.filter(
        (p) =>
          !p.metadata.deletionTimestamp &&
          p.status?.conditions?.some((c) => c.type === 'kruntimes.io/RuntimedReady' && c.status === 'True') &&
          p.status.conditions.some((c) => c.type === 'Ready' && c.status === 'True'),
      );
      return pods.length >= count ? pods : undefined;
    },
    90_000,
    100,
    () => describePods(ns, `runtime=${runtime}`),
  );
}

export function bashRuntime(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    template: {
      spec: {
        containers: [
          {
            name: 'runtime',
            image: 'ghcr.io/kruntimes/bash-runtime:v0.0.3',
            args: ['--port=9091', '--work-dir=/workspace'],
          },
        ],
      },
    },
    ...extra,
  };
}

let seq = 0;
export async function createRun(
  ns: string,
  spec: Record<string, unknown>,
  meta: Record<string, unknown> = {},
): Promise<RunObj> {
  const name = (meta.name as string | undefined) ?? `run-${++seq}`;
  return admin().create<RunObj>(`${GROUP}/namespaces/${ns}/runs`, {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'Run',
    metadata: { ...meta, name },
    spec,
  });
}

export const getRun = (ns: string, name: string): Promise<RunObj> =>
  admin().get<RunObj>(`${GROUP}/namespaces/${ns}/runs/${name}`);

export async function finished(ns: string, name: string, timeoutMs = 60_000): Promise<RunObj> {
  return eventually(
    `Run ${name} to finish`,
    async () => {
      const r = await getRun(ns, name);
      return ['Succeeded', 'Failed', 'Timeout', 'Cancelled'].includes(r.status?.phase ?? '') ? r : undefined;
    },
    timeoutMs,
    20,
    () => describeRun(ns, name),
  );
}

export async function phase(ns: string, name: string, want: string, timeoutMs = 60_000): Promise<RunObj> {
  return eventually(
    `Run ${name} in phase ${want}`,
    async () => {
      const r = await getRun(ns, name);
      return r.status?.phase === want ? r : undefined;
    },
    timeoutMs,
    20,
    () => describeRun(ns, name),
  );
}

/** A Run's status in one line for a timeout message. */
async function describeRun(ns: string, name: string): Promise<string> {
  const r = await getRun(ns, name);
  return JSON.stringify({ spec: { runtime: r.spec?.runtime }, status: r.status ?? {} });
}

/** The Pods matching a selector, each with its phase, node and conditions, for a timeout message. */
async function describePods(ns: string, labelSelector: string): Promise<string> {
  const pods = (await admin().list<PodObj>(`/api/v1/namespaces/${ns}/pods`, { labelSelector })).items;
  const one = (p: PodObj): string => {
    const conds = (p.status?.conditions ?? []).map((c) => `${c.type}=${c.status}`).join(',');
    const gone = p.metadata.deletionTimestamp ? ' deleting' : '';
    return `${p.metadata.name} ${p.status?.phase ?? '?'}${gone} [${conds}]`;
  };
  return pods.length ? pods.map(one).join('; ') : 'no Pods';
}

export function cond(r: RunObj, type: string): { status: string; reason: string; message: string } | undefined {
  return r.status?.conditions?.find((c) => c.type === type);
}

export interface RunEvent {
  type: string;
  reason: string;
  message: string;
  source?: { component?: string };
}

/** Waits for an Event about the Run with this reason (Events are written best-effort, just after the status). */
export async function runEvent(ns: string, run: string, reason: string, timeoutMs = 20_000): Promise<RunEvent> {
  return eventually(
    `Event ${reason} for Run ${run}`,
    async () => {
      const list = await admin().list<KubeObject & RunEvent>(`/api/v1/namespaces/${ns}/events`, {
        fieldSelector: `involvedObject.kind=Run,involvedObject.name=${run}`,
      });
      return list.items.find((e) => e.reason === reason);
    },
    timeoutMs,
    100,
  );
}

/**
 * A Runtime spec whose artifact store is the test S3 server `s3` (bucket kruntimes-artifacts,
 * prefix e2e), its credentials in the Secret s3-creds created in `ns`.
 */
export async function withS3Store(
  ns: string,
  s3: { endpoint: string; accessKey: string; secretKey: string },
  spec: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  await admin().create(`/api/v1/namespaces/${ns}/secrets`, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 's3-creds' },
    stringData: { AWS_ACCESS_KEY_ID: s3.accessKey, AWS_SECRET_ACCESS_KEY: s3.secretKey },
  });
  return {
    ...spec,
    artifactStore: {
      driver: 's3',
      s3: {
        bucket: 'kruntimes-artifacts',
        prefix: 'e2e',
        region: 'us-east-1',
        endpoint: s3.endpoint,
        forcePathStyle: true,
        credentialsSecretName: 's3-creds',
      },
    },
  };
}
