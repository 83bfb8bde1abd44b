/**
 * JobClass benchmark (not a test): Job create-to-Running and create-to-Succeeded p50/p95 for the
 * Kubernetes adapter (batch/v1 Job on the node agent) and the OpenSandbox adapter (local
 * spec-validating server; the sandbox is finished as soon as it runs), next to a plain batch/v1
 * Job doing the same work on the same node agent, all in one run. Jobs run one after another.
 */
import { join } from 'node:path';
import { down, up } from '../localenv/environment.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import type { KubeClient } from '../lib/kube/client.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { startOpenSandboxServer, type OpenSandboxTestServer } from '../e2e/opensandbox-server/server.ts';
import { ms, summary } from './stats.ts';

const N = Number(process.env.BENCH_JOBS ?? '15');
const X = '/apis/execution.ayatori.ddupan.top/v1alpha1';
const NS = 'bench';
type Job = KubeObject & {
  status?: {
    phase?: string;
    execution?: { sandboxID?: string };
    conditions?: { type: string; status: string }[];
    active?: number;
    ready?: number;
  };
};

async function poll<T>(fn: () => Promise<T | undefined>): Promise<T> {
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function measure(
  api: KubeClient,
  name: string,
  cls: string,
  srv?: OpenSandboxTestServer,
): Promise<[number, number]> {
  const t0 = Date.now();
  await api.create(`${X}/namespaces/${NS}/jobs`, {
    apiVersion: 'execution.ayatori.ddupan.top/v1alpha1',
    kind: 'Job',
    metadata: { name },
    spec: { jobClassName: cls, image: 'bash', command: ['bash', '-c', 'sleep 0.2'] },
  });
  const running = await poll(async () => {
    const j = await api.get<Job>(`${X}/namespaces/${NS}/jobs/${name}`);
    return ['Running', 'Succeeded'].includes(j.status?.phase ?? '') ? j : undefined;
  });
  const tRun = Date.now() - t0;
  if (srv && running.status?.execution?.sandboxID) srv.finish(running.status.execution.sandboxID, true);
  await poll(async () =>
    (await api.get<Job>(`${X}/namespaces/${NS}/jobs/${name}`)).status?.phase === 'Succeeded' ? true : undefined,
  );
  return [tRun, Date.now() - t0];
}

async function plain(api: KubeClient, i: number): Promise<[number, number]> {
  const t0 = Date.now();
  await api.create(`/apis/batch/v1/namespaces/${NS}/jobs`, {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: `plain-${i}` },
    spec: {
      backoffLimit: 0,
      template: {
        spec: {
          restartPolicy: 'Never',
          containers: [{ name: 'c', image: 'bash', command: ['bash', '-c', 'sleep 0.2'] }],
        },
      },
    },
  });
  await poll(async () => {
    const p = await api.list<KubeObject & { status?: { phase?: string } }>(`/api/v1/namespaces/${NS}/pods`, {
      labelSelector: `job-name=plain-${i}`,
    });
    return p.items.some((x) => ['Running', 'Succeeded'].includes(x.status?.phase ?? '')) ? true : undefined;
  });
  const tRun = Date.now() - t0;
  await poll(async () =>
    (await api.get<Job>(`/apis/batch/v1/namespaces/${NS}/jobs/plain-${i}`)).status?.conditions?.some(
      (c) => c.type === 'Complete' && c.status === 'True',
    )
      ? true
      : undefined,
  );
  return [tRun, Date.now() - t0];
}

function line(label: string, xs: [number, number][]): string {
  const r = summary(xs.map((x) => x[0])),
    s = summary(xs.map((x) => x[1]));
  return `${label.padEnd(34)} create->Running p50 ${ms(r.p50)} p95 ${ms(r.p95)}   create->Succeeded p50 ${ms(s.p50)} p95 ${ms(s.p95)}`;
}

async function main(): Promise<void> {
  const root = join(REPO_ROOT, '.kruntimes', 'bench', `jc-${process.pid}`);
  const env = await up({
    root,
    nodes: ['bench-a'],
    ...(process.env.KRT_BIN_DIR ? { binDir: process.env.KRT_BIN_DIR } : {}),
  });
  const api = env.admin;
  const srv = await startOpenSandboxServer({ apiKeys: ['k'], insecure: true });
  try {
    await api.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    await api.create(`/api/v1/namespaces/${NS}/serviceaccounts`, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'runner' },
    });
    await api.create(`/api/v1/namespaces/${NS}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'os' },
      stringData: { key: 'k' },
    });
    await api.create(`${X}/kubernetesexecutionparameters`, {
      apiVersion: 'execution.ayatori.ddupan.top/v1alpha1',
      kind: 'KubernetesExecutionParameters',
      metadata: { name: 'k8s' },
      spec: { serviceAccountName: 'runner' },
    });
    await api.create(`${X}/opensandboxexecutionparameters`, {
      apiVersion: 'execution.ayatori.ddupan.top/v1alpha1',
      kind: 'OpenSandboxExecutionParameters',
      metadata: { name: 'os' },
      spec: { endpoint: srv.url, apiKeySecretRef: { namespace: NS, name: 'os', key: 'key' } },
    });
    const res = { defaults: { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '100m', memory: '64Mi' } } };
    for (const [name, ctrl, kind, p] of [
      ['k8s', 'kubernetes', 'KubernetesExecutionParameters', 'k8s'],
      ['os', 'opensandbox', 'OpenSandboxExecutionParameters', 'os'],
    ] as const) {
      await api.create(`${X}/jobclasses`, {
        apiVersion: 'execution.ayatori.ddupan.top/v1alpha1',
        kind: 'JobClass',
        metadata: { name },
        spec: {
          controllerName: `execution.ayatori.ddupan.top/${ctrl}`,
          parametersRef: { group: 'execution.ayatori.ddupan.top', kind, name: p },
          resources: res,
        },
      });
      await poll(async () =>
        (await api.get<Job>(`${X}/jobclasses/${name}`)).status?.conditions?.some(
          (c) => c.type === 'Ready' && c.status === 'True',
        )
          ? true
          : undefined,
      );
    }
    const k: [number, number][] = [],
      o: [number, number][] = [],
      b: [number, number][] = [];
    for (let i = 0; i < N; i++) {
      k.push(await measure(api, `k-${i}`, 'k8s'));
      o.push(await measure(api, `o-${i}`, 'os', srv));
      b.push(await plain(api, i));
    }
    process.stdout.write(
      `${[`JobClass Jobs, ${N} each, one at a time, command 'sleep 0.2':`, line('Kubernetes adapter (batch/v1 Job)', k), line('OpenSandbox adapter (local server)', o), line('plain batch/v1 Job (baseline)', b)].join('\n')}\n`,
    );
  } finally {
    api.close();
    await srv.close();
    await down(root, { purge: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
