/**
 * The main demo on the local environment: a Deployment and a batch/v1 Job of the project's own
 * image, run by the real controller-manager and scheduler on the node agent, with progress and
 * the Job's logs. (Replaced by the Workflow demo once Workflows land.)
 */
import type { Env } from '../../localenv/environment.ts';
import { isApiError } from '../../lib/kube/errors.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import type { WorkflowSpec } from '../../lib/workflow/core.ts';
import { renderRun } from '../wf/commands.ts';
import { isTerminal } from '../../lib/run/phases.ts';
import { REPO_ROOT } from '../../localenv/paths.ts';

const NS = 'kruntimes-demo';
const IMAGE = 'ghcr.io/kruntimes/kruntimes:dev';
type Status = KubeObject & {
  status?: {
    availableReplicas?: number;
    succeeded?: number;
    failed?: number;
    conditions?: { type: string; status: string }[];
  };
};

async function until<T>(
  what: string,
  fn: () => Promise<T | undefined>,
  say: (m: string) => void,
  timeoutMs = 120_000,
): Promise<T> {
  const start = Date.now();
  let last = start;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() - start > timeoutMs) throw new Error(`demo: timed out waiting for ${what}`);
    if (Date.now() - last > 3000) {
      say(`waiting for ${what}...`);
      last = Date.now();
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Removes what an earlier demo left (the namespace itself is kept: deleting namespaces waits on discovery). */
async function reset(env: Env): Promise<void> {
  const api = env.admin;
  try {
    await api.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
  } catch (err) {
    if (!isApiError(err, 409)) throw err;
  }
  const paths = [
    `/apis/apps/v1/namespaces/${NS}/deployments/demo-server`,
    `/apis/batch/v1/namespaces/${NS}/jobs/demo-job`,
    `/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runtimes/bash`,
    `/apis/kruntimes.io/v1alpha1/namespaces/${NS}/workflows/ci-data-sharing-demo`,
    ...[0, 1, 2].map((i) => `/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runs/demo-run-${i}`),
  ];
  for (const p of paths)
    await api.delete(p, { propagationPolicy: 'Foreground' }).catch((err: unknown) => {
      if (!isApiError(err, 404)) throw err;
    });
  for (const p of paths) {
    await until(
      `${p.split('/').slice(-2).join('/')} from an earlier demo to be deleted`,
      async () => {
        try {
          await api.get(p);
          return undefined;
        } catch (err) {
          return isApiError(err, 404) ? true : undefined;
        }
      },
      () => undefined,
    );
  }
  await until(
    'the default ServiceAccount',
    () => api.get(`/api/v1/namespaces/${NS}/serviceaccounts/default`),
    () => undefined,
  );
}

function deployment(): object {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'demo-server' },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: 'demo-server' } },
      template: {
        metadata: { labels: { app: 'demo-server' } },
        spec: {
          containers: [
            {
              name: 'server',
              image: IMAGE,
              args: ['demo-server', '8080'],
              ports: [{ containerPort: 8080, name: 'http' }],
              readinessProbe: { httpGet: { path: '/healthz', port: 'http' }, periodSeconds: 1 },
              env: [{ name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } }],
            },
          ],
        },
      },
    },
  };
}

function job(): object {
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: 'demo-job' },
    spec: {
      backoffLimit: 1,
      template: {
        spec: {
          restartPolicy: 'Never',
          containers: [
            {
              name: 'job',
              image: IMAGE,
              args: ['demo-job'],
              env: [{ name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } }],
            },
          ],
        },
      },
    },
  };
}

export async function runDemo(env: Env, say: (m: string) => void): Promise<void> {
  const t0 = Date.now();
  const api = env.admin;
  say(`demo: namespace ${NS}`);
  await reset(env);
  await api.create(`/apis/apps/v1/namespaces/${NS}/deployments`, deployment());
  await api.create(`/apis/batch/v1/namespaces/${NS}/jobs`, job());
  say('demo: created Deployment demo-server (2 replicas) and Job demo-job');
  await until(
    'Deployment demo-server to be available',
    async () => {
      const d = await api.get<Status>(`/apis/apps/v1/namespaces/${NS}/deployments/demo-server`);
      return d.status?.availableReplicas === 2 ? d : undefined;
    },
    say,
  );
  say(`demo: Deployment demo-server available (2/2 ready) after ${Date.now() - t0} ms`);
  const j = await until(
    'Job demo-job to finish',
    async () => {
      const x = await api.get<Status>(`/apis/batch/v1/namespaces/${NS}/jobs/demo-job`);
      return x.status?.conditions?.some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True')
        ? x
        : undefined;
    },
    say,
  );
  const ok = j.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True');
  say(`demo: Job demo-job ${ok ? 'completed' : 'FAILED'} after ${Date.now() - t0} ms`);
  const pods = await api.list(`/api/v1/namespaces/${NS}/pods`, { labelSelector: 'job-name=demo-job' });
  for (const p of pods.items) {
    process.stdout.write(`--- logs of pod ${p.metadata.name} (via the API server, pods/log) ---\n`);
    process.stdout.write(await api.getText(`/api/v1/namespaces/${NS}/pods/${p.metadata.name}/log`));
  }
  if (!ok) throw new Error('demo: the Job failed');
  await runsDemo(env, say);
  process.stdout.write(
    `demo finished in ${Date.now() - t0} ms. Try: kubectl get pods,runtimes,runs -n ${NS} -o wide\n`,
  );
}

type RunStatus = KubeObject & {
  status?: {
    phase?: string;
    outputs?: Record<string, string>;
    startTime?: string;
    completionTime?: string;
    message?: string;
  };
};

/** Runs on warm Runtime Pods: the bash example Runtime, then a few Runs with outputs. */
async function runsDemo(env: Env, say: (m: string) => void): Promise<void> {
  const api = env.admin;
  const G = `/apis/kruntimes.io/v1alpha1/namespaces/${NS}`;
  for (const doc of parseAllDocuments(
    readFileSync(join(REPO_ROOT, 'examples/workflows/runtime-bash.yaml'), 'utf8'),
  ).map((d) => d.toJSON() as KubeObject & { kind: string })) {
    const path = doc.kind === 'Runtime' ? `${G}/runtimes` : `/api/v1/namespaces/${NS}/persistentvolumeclaims`;
    await api.create(path, doc).catch((err: unknown) => {
      if (!isApiError(err, 409)) throw err;
    });
  }
  say(
    'demo: created Runtime bash with a Filesystem artifact store (examples/workflows/runtime-bash.yaml), waiting for its warm Runtime Pod',
  );
  await until(
    'the bash Runtime to be ready',
    async () => {
      const rt = await api.get<KubeObject & { status?: { readyReplicas?: number } }>(`${G}/runtimes/bash`);
      return (rt.status?.readyReplicas ?? 0) > 0 ? rt : undefined;
    },
    say,
  );
  const scripts = [
    'echo "greeting=hello from a warm Runtime Pod" >> "$KRUNTIME_OUTPUTS"',
    'echo "answer=$((6 * 7))" >> "$KRUNTIME_OUTPUTS"',
    'echo "kernel=$(uname -s)" >> "$KRUNTIME_OUTPUTS"',
  ];
  const t = Date.now();
  for (const [i, s] of scripts.entries())
    await api.create(`${G}/runs`, {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'Run',
      metadata: { name: `demo-run-${i}` },
      spec: { runtime: 'bash', source: { inline: s } },
    });
  for (let i = 0; i < scripts.length; i++) {
    const r = await until(
      `Run demo-run-${i}`,
      async () => {
        const x = await api.get<RunStatus>(`${G}/runs/demo-run-${i}`);
        return isTerminal(x.status?.phase) ? x : undefined;
      },
      say,
    );
    const took = Date.parse(r.status?.completionTime ?? '') - Date.parse(r.status?.startTime ?? '');
    say(
      `demo: Run demo-run-${i} ${r.status?.phase} (ran ${Number.isFinite(took) ? `${took} ms` : '?'}) outputs ${JSON.stringify(r.status?.outputs ?? {})}`,
    );
    if (r.status?.phase !== 'Succeeded')
      throw new Error(`demo: Run demo-run-${i} ${r.status?.phase}: ${r.status?.message}`);
  }
  say(
    `demo: ${scripts.length} Runs finished ${Date.now() - t} ms after the first create. Try: ./bin/krt get runs -n ${NS}; ./bin/krt logs -n ${NS} demo-run-0`,
  );
  await workflowDemo(env, say);
}

type JobStatus = {
  phase?: string;
  outputs?: Record<string, string>;
  artifacts?: Record<string, { digest?: string; sizeBytes?: number }>;
  startedAt?: string;
  finishedAt?: string;
  steps?: {
    name: string;
    phase?: string;
    runName?: string;
    outputs?: Record<string, string>;
    startedAt?: string;
    finishedAt?: string;
  }[];
};
type Wfr = KubeObject & { status?: { phase?: string; message?: string; jobs?: Record<string, JobStatus> } };

function progressLine(w: Wfr): string {
  return Object.entries(w.status?.jobs ?? {})
    .map(
      ([j, s]) =>
        `${j}: ${s.phase ?? 'Pending'} [${(s.steps ?? []).map((x) => `${x.name}=${x.phase ?? 'Pending'}`).join(', ')}]`,
    )
    .join('  ');
}

const took = (a?: string, b?: string): string => {
  const d = Date.parse(b ?? '') - Date.parse(a ?? '');
  return Number.isFinite(d) ? `${d} ms` : '-';
};
const outs = (o?: Record<string, string>): string =>
  o && Object.keys(o).length ? ` outputs ${JSON.stringify(o)}` : '';

function printJobs(done: Wfr): void {
  for (const [job, j] of Object.entries(done.status?.jobs ?? {})) {
    process.stdout.write(`job ${job}: ${j.phase} (${took(j.startedAt, j.finishedAt)})${outs(j.outputs)}\n`);
    for (const st of j.steps ?? [])
      process.stdout.write(
        `  step ${st.name}: ${st.phase} run ${st.runName ?? '-'} (${took(st.startedAt, st.finishedAt)})${outs(st.outputs)}\n`,
      );
    for (const [a, ref] of Object.entries(j.artifacts ?? {}))
      process.stdout.write(`  artifact ${a}: ${ref.sizeBytes ?? '?'} bytes ${ref.digest ?? ''}\n`);
  }
}

/** The seed's ci-data-sharing-demo Workflow: job-local workspace sharing and a job-to-job artifact. */
async function workflowDemo(env: Env, say: (m: string) => void): Promise<void> {
  const api = env.admin;
  const G = `/apis/kruntimes.io/v1alpha1/namespaces/${NS}`;
  const wf = parse(
    readFileSync(join(REPO_ROOT, 'examples/workflows/ci-data-sharing-demo.yaml'), 'utf8'),
  ) as KubeObject & { spec: WorkflowSpec };
  await api.apply(`${G}/workflows/${wf.metadata.name}`, wf, 'kruntimes-demo');
  const t0 = Date.now();
  const run = await api.create<Wfr>(`${G}/workflowruns`, renderRun(wf, {}));
  const name = run.metadata.name ?? '';
  say(`demo: triggered Workflow ci-data-sharing-demo as WorkflowRun ${name}`);
  let last = '';
  const done = await until(
    `WorkflowRun ${name} to finish`,
    async () => {
      const w = await api.get<Wfr>(`${G}/workflowruns/${name}`);
      const line = progressLine(w);
      if (line !== last) {
        say(`  ${line}`);
        last = line;
      }
      return ['Succeeded', 'Failed', 'Cancelled'].includes(w.status?.phase ?? '') ? w : undefined;
    },
    () => undefined,
  );
  process.stdout.write(
    `--- WorkflowRun ${name}: ${done.status?.phase} in ${Date.now() - t0} ms (trigger to Succeeded) ---\n`,
  );
  printJobs(done);
  const verify = done.status?.jobs?.deploy?.steps?.[0]?.runName;
  if (verify) {
    process.stdout.write(`--- logs of ${verify} (deploy/verify-artifact, via logs.kruntimes.io) ---\n`);
    const logs = await api.request<{ items: { message: string }[] }>(
      'GET',
      `/apis/logs.kruntimes.io/v1alpha1/namespaces/${NS}/runs/${verify}/log`,
    );
    for (const i of logs.items) process.stdout.write(`${i.message}\n`);
  }
  if (done.status?.phase !== 'Succeeded')
    throw new Error(`demo: WorkflowRun ${name} ${done.status?.phase}: ${done.status?.message ?? ''}`);
}
