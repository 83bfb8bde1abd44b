/**
 * The soak's workload on one namespace: setup (a bash Runtime with a Filesystem artifact store
 * and a hostPath execution-marker directory, a session Run, JobClasses on both adapters), the
 * submission of each load kind, and the final reading of every item's outcome.
 */
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KubeClient } from '../../lib/kube/client.ts';
import { isApiError } from '../../lib/kube/errors.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { PROTOCOL } from '../../lib/session/channel.ts';
import type { OpenSandboxTestServer } from '../../e2e/opensandbox-server/server.ts';
import { TERMINAL, type Outcome } from './accounting.ts';
import type { LoadItem, LoadKind } from './schedule.ts';

export const G = '/apis/kruntimes.io/v1alpha1';
export const X = '/apis/execution.ayatori.ddupan.top/v1alpha1';
const XV = 'execution.ayatori.ddupan.top/v1alpha1';
export const RUNTIME = 'soak-bash';
const SLEEP: Partial<Record<LoadKind, number>> = { 'task-short': 0, 'task-medium': 2, 'task-long': 8, 'log-follow': 2 };

export type Obj = KubeObject & {
  status?: {
    phase?: string;
    reason?: string;
    message?: string;
    outputs?: Record<string, string>;
    artifactRefs?: { name: string; digest: string; location: { filesystem?: { path: string } } }[];
    conditions?: { type: string; status: string; reason?: string }[];
    execution?: { sandboxID?: string };
    readyReplicas?: number;
  };
  spec?: Record<string, unknown>;
};

export interface Workload {
  api: KubeClient;
  ns: string;
  root: string;
  markers: string;
  suffix: string;
  srv?: OpenSandboxTestServer;
  /** The artifact PVC's volume directory name under <root>/volumes (known once bound). */
  artifactVolume?: string;
  /** The session Run operations go to; replaced when it ends (a Runtime Pod deleted under it). */
  session: string;
  /** Results of session operations and log follows (they are not API objects). */
  direct: Map<string, { ok: boolean; error?: string; logsGone?: boolean; startedAt: number; endedAt: number }>;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Retries fn until it returns a value or the deadline passes (faults make the API unavailable for a while). */
export async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end)
      throw new Error(`timed out waiting for ${what}${last instanceof Error ? `: ${last.message}` : ''}`);
    await sleep(250);
  }
}

/** Creates an object, tolerating a lost answer: AlreadyExists after a retry means it was created. */
export async function createIdempotent(api: KubeClient, path: string, obj: object, timeoutMs: number): Promise<void> {
  let tries = 0;
  await until(
    `create ${path}`,
    async () => {
      try {
        tries++;
        await api.create(path, obj);
        return true;
      } catch (err) {
        if (tries > 1 && isApiError(err, 409)) return true;
        throw err;
      }
    },
    timeoutMs,
  );
}

function runtimeSpec(markers: string): Record<string, unknown> {
  return {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'Runtime',
    metadata: { name: RUNTIME },
    spec: {
      replicas: 2,
      capacity: { resources: { runs: '16' } },
      artifactStore: { driver: 'filesystem', filesystem: { volumeClaimName: 'soak-artifacts' } },
      template: {
        spec: {
          volumes: [{ name: 'markers', hostPath: { path: markers, type: 'Directory' } }],
          containers: [
            {
              name: 'runtime',
              image: 'ghcr.io/kruntimes/bash-runtime:v0.0.3',
              args: ['--port=9091', '--work-dir=/workspace'],
              volumeMounts: [{ name: 'markers', mountPath: '/soak-markers' }],
            },
          ],
        },
      },
    },
  };
}

/** The marker line an execution appends: its key, then a nonce (one line per execution). */
// The key, then what tells executions apart when a defect is traced: shell pid and a random
// number, the wall clock (bash's $EPOCHREALTIME), the host and the working directory.
const mark = (key: string): string => `echo "${key} $$-$RANDOM $EPOCHREALTIME $HOSTNAME $PWD" >> /soak-markers/markers`;

export function taskScript(name: string, kind: LoadKind): string {
  const s = SLEEP[kind] ?? 0;
  const lines = kind === 'log-follow' ? 'for i in $(seq 1 20); do echo "line $i"; sleep 0.1; done; echo END' : '';
  return [
    mark(name),
    s ? `sleep ${s}` : '',
    lines,
    `echo "${name}" > "$KRUNTIME_ARTIFACTS_DIR/out.txt"`,
    `echo "tag=${name}" >> "$KRUNTIME_OUTPUTS"`,
  ]
    .filter(Boolean)
    .join('\n');
}

export const expectedDigest = (name: string): string =>
  `sha256:${createHash('sha256').update(`${name}\n`).digest('hex')}`;

async function ready(api: KubeClient, path: string, type = 'Ready'): Promise<void> {
  await until(
    `${path} ${type}`,
    async () =>
      (await api.get<Obj>(path)).status?.conditions?.some((c) => c.type === type && c.status === 'True')
        ? true
        : undefined,
    120_000,
  );
}

/** The namespace, marker directory, Runtime, PVC and session Run. */
export async function setupRuns(w: Workload): Promise<void> {
  const { api, ns } = w;
  mkdirSync(w.markers, { recursive: true });
  chmodSync(w.markers, 0o1777);
  writeFileSync(join(w.markers, 'markers'), '', { mode: 0o666 });
  chmodSync(join(w.markers, 'markers'), 0o666);
  await api.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  await until('default ServiceAccount', () => api.get(`/api/v1/namespaces/${ns}/serviceaccounts/default`), 60_000);
  await api.create(`/api/v1/namespaces/${ns}/persistentvolumeclaims`, {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: 'soak-artifacts' },
    spec: { accessModes: ['ReadWriteMany'], resources: { requests: { storage: '1Gi' } } },
  });
  await api.create(`${G}/namespaces/${ns}/runtimes`, runtimeSpec(w.markers));
  await until(
    'Runtime ready',
    async () =>
      ((await api.get<Obj>(`${G}/namespaces/${ns}/runtimes/${RUNTIME}`)).status?.readyReplicas ?? 0) >= 2 || undefined,
    120_000,
  );
  await createSession(w, w.session);
  await ready(api, '/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.sessions.kruntimes.io', 'Available');
  await ready(api, '/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.logs.kruntimes.io', 'Available');
}

/** JobClasses on both adapters (cluster-scoped objects named with the soak's suffix). */
export async function setupJobClasses(w: Workload): Promise<void> {
  const { api, ns, suffix } = w;
  await api.create(`/api/v1/namespaces/${ns}/serviceaccounts`, {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: { name: 'runner' },
  });
  await api.create(`${X}/kubernetesexecutionparameters`, {
    apiVersion: XV,
    kind: 'KubernetesExecutionParameters',
    metadata: { name: `soak-k8s-${suffix}` },
    spec: { serviceAccountName: 'runner' },
  });
  const classes: [string, string, string][] = [[`soak-k8s-${suffix}`, 'kubernetes', 'KubernetesExecutionParameters']];
  if (w.srv) {
    await api.create(`/api/v1/namespaces/${ns}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'os' },
      stringData: { key: 'k' },
    });
    await api.create(`${X}/opensandboxexecutionparameters`, {
      apiVersion: XV,
      kind: 'OpenSandboxExecutionParameters',
      metadata: { name: `soak-os-${suffix}` },
      spec: { endpoint: w.srv.url, apiKeySecretRef: { namespace: ns, name: 'os', key: 'key' } },
    });
    classes.push([`soak-os-${suffix}`, 'opensandbox', 'OpenSandboxExecutionParameters']);
  }
  const resources = {
    defaults: { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '100m', memory: '64Mi' } },
  };
  for (const [name, ctrl, kind] of classes) {
    await api.create(`${X}/jobclasses`, {
      apiVersion: XV,
      kind: 'JobClass',
      metadata: { name },
      spec: {
        controllerName: `execution.ayatori.ddupan.top/${ctrl}`,
        parametersRef: { group: 'execution.ayatori.ddupan.top', kind, name },
        resources,
      },
    });
    await ready(api, `${X}/jobclasses/${name}`);
  }
}

/** Deletes the soak's cluster-scoped objects. */
export async function teardownJobClasses(w: Workload): Promise<void> {
  const paths = [
    `${X}/jobclasses/soak-k8s-${w.suffix}`,
    `${X}/jobclasses/soak-os-${w.suffix}`,
    `${X}/kubernetesexecutionparameters/soak-k8s-${w.suffix}`,
    `${X}/opensandboxexecutionparameters/soak-os-${w.suffix}`,
  ];
  for (const p of paths) await w.api.delete(p).catch(() => undefined);
}

function workflowRun(name: string): Record<string, unknown> {
  return {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'WorkflowRun',
    metadata: { name },
    spec: {
      jobs: {
        build: {
          'runs-on': RUNTIME,
          steps: [
            { name: 'write', run: `${mark(`${name}/write`)}\necho "${name}" > shared.txt` },
            { name: 'read', run: `${mark(`${name}/read`)}\necho "seen=$(cat shared.txt)" >> "$KRUNTIME_OUTPUTS"` },
          ],
        },
      },
    },
  };
}

function jobObject(name: string, cls: string): Record<string, unknown> {
  return {
    apiVersion: XV,
    kind: 'Job',
    metadata: { name },
    spec: { jobClassName: cls, image: 'bash', command: ['bash', '-c', 'sleep 1'] },
  };
}

/** Submits one item; returns when its create was acknowledged (a session op or follow: when it ended). */
export async function submit(w: Workload, item: LoadItem, timeoutMs: number): Promise<void> {
  const { api, ns } = w;
  switch (item.kind) {
    case 'workflow':
      return createIdempotent(api, `${G}/namespaces/${ns}/workflowruns`, workflowRun(item.name), timeoutMs);
    case 'job-k8s':
      return createIdempotent(
        api,
        `${X}/namespaces/${ns}/jobs`,
        jobObject(item.name, `soak-k8s-${w.suffix}`),
        timeoutMs,
      );
    case 'job-os':
      return createIdempotent(
        api,
        `${X}/namespaces/${ns}/jobs`,
        jobObject(item.name, `soak-os-${w.suffix}`),
        timeoutMs,
      );
    case 'session-op':
      return sessionOp(w, item.name);
    default:
      await createIdempotent(
        api,
        `${G}/namespaces/${ns}/runs`,
        {
          apiVersion: 'kruntimes.io/v1alpha1',
          kind: 'Run',
          metadata: { name: item.name },
          spec: { runtime: RUNTIME, source: { inline: taskScript(item.name, item.kind) } },
        },
        timeoutMs,
      );
      if (item.kind === 'log-follow') void follow(w, item.name);
  }
}

/** One operation on the session Run: a marker, then `hi` on stdout; not retried (it would run twice). */
async function sessionOp(w: Workload, name: string): Promise<void> {
  const startedAt = Date.now();
  let out = '';
  try {
    const ws = await w.api.websocket(
      `/apis/sessions.kruntimes.io/v1alpha1/namespaces/${w.ns}/runs/${w.session}/session`,
      [PROTOCOL],
      [
        ['command', 'sh'],
        ['command', '-c'],
        ['command', `${mark(name)}; echo hi`],
      ],
    );
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => {
        ws.terminate();
        reject(new Error('no end within 60 s'));
      }, 60_000);
      ws.on('message', (m: Buffer) => {
        if (m[0] === 1) out += m.subarray(1).toString();
      });
      ws.on('error', reject);
      ws.on('close', () => {
        clearTimeout(t);
        resolve();
      });
    });
    const ok = out.includes('hi');
    w.direct.set(name, {
      ok,
      startedAt,
      endedAt: Date.now(),
      ...(ok ? {} : { error: `stdout ${JSON.stringify(out)}` }),
    });
  } catch (err) {
    const error = err instanceof Error ? err.message : String(err);
    w.direct.set(name, { ok: false, error, startedAt, endedAt: Date.now() });
    if (error.includes('has ended')) void newSession(w).catch(() => undefined);
  }
}

let sessions = 0;
let starting: Promise<void> | undefined;
/** A new session Run for the operations that follow (one at a time); the ended one stays as it ended. */
function newSession(w: Workload): Promise<void> {
  starting ??= (async () => {
    const name = `soak-shell-${++sessions}`;
    await createSession(w, name);
    w.session = name;
  })().finally(() => {
    starting = undefined;
  });
  return starting;
}

export async function createSession(w: Workload, name: string): Promise<void> {
  await createIdempotent(
    w.api,
    `${G}/namespaces/${w.ns}/runs`,
    {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'Run',
      metadata: { name },
      spec: { runtime: RUNTIME, mode: { session: {} } },
    },
    60_000,
  );
  await until(
    `session ${name} Ready`,
    async () =>
      (await w.api.get<Obj>(`${G}/namespaces/${w.ns}/runs/${name}`)).status?.phase === 'Ready' ? true : undefined,
    120_000,
  );
}

/** Whether a log stream has the END line; a chunk may end inside it, so the text is read whole (it is small). */
export async function sawEnd(stream: AsyncIterable<unknown>): Promise<boolean> {
  let text = '';
  for await (const chunk of stream) text += String(chunk);
  return text.includes('END');
}

/** How long a log follow may take in all: longer than any recovery the soak has measured (kube-apiserver 198 s). */
export const FOLLOW_DEADLINE_MS = 600_000;

/**
 * Follows a Run's log through the aggregated API, reconnecting until END or the Run's end; then,
 * once the Run is terminal (never before: its last lines may not be written yet), reads it whole.
 * Both wait out an aggregated API that is down (the extension server's recovery took up to 106 s
 * in the 30-minute run, longer than the 60 tries this used to allow).
 */
async function follow(w: Workload, name: string): Promise<void> {
  const startedAt = Date.now();
  const deadline = startedAt + FOLLOW_DEADLINE_MS;
  const path = `/apis/logs.kruntimes.io/v1alpha1/namespaces/${w.ns}/runs/${name}/log`;
  const terminal = async (): Promise<boolean> => {
    const r = await w.api.get<Obj>(`${G}/namespaces/${w.ns}/runs/${name}`).catch(() => undefined);
    return TERMINAL.has(r?.status?.phase ?? '');
  };
  let seen = false;
  let ended = false;
  while (!seen && !ended && Date.now() < deadline) {
    seen = await w.api
      .stream(path, { query: { follow: 'true' } })
      .then(sawEnd)
      .catch(() => sleep(1000).then(() => false));
    ended = await terminal();
  }
  // The follow may have been cut by a fault before END: the whole log once more, after the Run ended.
  let read = seen;
  let logsGone = false;
  while (!read && !logsGone && Date.now() < deadline) {
    if (!ended) ended = await terminal();
    if (!ended) {
      await sleep(1000);
      continue;
    }
    const whole = await w.api.stream(path).then(sawEnd, (err: unknown) => (isApiError(err, 409) ? 'gone' : undefined));
    if (whole === 'gone') logsGone = true;
    else if (whole === undefined) await sleep(1000);
    else [seen, read] = [whole, true];
  }
  const error = logsGone
    ? 'the log is gone with its deleted Runtime Pod (409)'
    : read
      ? 'END missing from the log'
      : 'the log could not be read after the Run ended';
  w.direct.set(name, { ok: seen, startedAt, endedAt: Date.now(), ...(seen ? {} : { error, logsGone }) });
}

/** Marker lines per key (the first word of each line). */
export function markerCounts(text: string): Map<string, number> {
  const m = new Map<string, number>();
  for (const line of text.split('\n')) {
    const key = line.split(' ')[0];
    if (key) m.set(key, (m.get(key) ?? 0) + 1);
  }
  return m;
}

/** The reason an object ended with: its end condition's (a Run's Completed, a Job's Failed/Succeeded), else status.reason. */
export function reasonOf(o: Obj | undefined): string | undefined {
  for (const type of ['Completed', 'Failed', 'Succeeded', 'Complete']) {
    const c = o?.status?.conditions?.find((x) => x.type === type && x.reason);
    if (c) return c.reason;
  }
  return o?.status?.reason;
}

/** What a Succeeded task Run must show: its output and its artifact, digest and bytes as written. */
export function checkTask(w: Workload, name: string, r: Obj): string | undefined {
  if (r.status?.outputs?.tag !== name) return `outputs ${JSON.stringify(r.status?.outputs)}`;
  const ref = r.status.artifactRefs?.find((a) => a.name === 'out.txt');
  if (!ref) return 'no artifact out.txt';
  if (ref.digest !== expectedDigest(name)) return `artifact digest ${ref.digest}`;
  const path = ref.location.filesystem?.path;
  const file = path ? join(w.root, 'volumes', w.artifactVolume ?? '', path) : '';
  if (!existsSync(file)) return `artifact file missing: ${file}`;
  const got = `sha256:${createHash('sha256').update(readFileSync(file)).digest('hex')}`;
  return got === ref.digest ? undefined : `artifact bytes ${got}`;
}

export interface Collected {
  objects: Map<string, Obj>;
  markers: Map<string, number>;
  sandboxes: Map<string, number>;
}

/** One item's outcome from the final objects, the watch's phase history and the markers. */
export function outcomeOf(
  w: Workload,
  item: LoadItem,
  createdAt: number | undefined,
  phases: string[],
  c: Collected,
): Outcome {
  const base: Outcome = { name: item.name, kind: item.kind, phases, ...(createdAt !== undefined ? { createdAt } : {}) };
  if (item.kind === 'session-op') {
    const d = w.direct.get(item.name);
    const phase = d ? (d.ok ? 'Succeeded' : 'Failed') : undefined;
    return {
      ...base,
      ...(phase ? { phase, phases: [phase], completedAt: d!.endedAt } : {}),
      ...(d?.error ? { reason: d.error } : {}),
      executions: d?.ok ? (c.markers.get(item.name) ?? 0) : Math.min(1, c.markers.get(item.name) ?? 0),
    };
  }
  const o = c.objects.get(item.name);
  const out: Outcome = { ...base, ...(o?.status?.phase ? { phase: o.status.phase } : {}) };
  const reason = reasonOf(o);
  if (reason && out.phase !== 'Succeeded') out.reason = reason;
  const done = o?.status && (o.status as { completionTime?: string }).completionTime;
  if (done) out.completedAt = Date.parse(done);
  if (item.kind === 'workflow') {
    const a = c.markers.get(`${item.name}/write`) ?? 0;
    const b = c.markers.get(`${item.name}/read`) ?? 0;
    out.executions = Math.max(a, b) > 1 ? Math.max(a, b) : Math.min(a, b);
  } else if (item.kind === 'job-os') {
    out.executions = c.sandboxes.get(o?.metadata.uid ?? '') ?? 0;
  } else if (item.kind !== 'job-k8s') {
    out.executions = c.markers.get(item.name) ?? 0;
  }
  if (out.phase === 'Succeeded' && o && item.kind.startsWith('task')) {
    const p = checkTask(w, item.name, o);
    if (p) Object.assign(out, { outputsOk: false, outputsProblem: p });
  }
  const followed = w.direct.get(item.name);
  if (out.phase === 'Succeeded' && item.kind === 'log-follow' && followed?.logsGone)
    Object.assign(out, { logsGone: true, outputsProblem: followed.error });
  else if (out.phase === 'Succeeded' && item.kind === 'log-follow' && !followed?.ok)
    Object.assign(out, { outputsOk: false, outputsProblem: followed?.error ?? 'follow not finished' });
  return out;
}
