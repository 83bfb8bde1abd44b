/**
 * The main demo on the local environment: a Deployment and a batch/v1 Job of the project's own
 * image, run by the real controller-manager and scheduler on the node agent, with progress and
 * the Job's logs. (Replaced by the Workflow demo once Workflows land.)
 */
import type { Env } from '../../localenv/environment.ts';
import { isApiError } from '../../lib/kube/errors.ts';
import type { KubeObject } from '../../lib/kube/types.ts';

const NS = 'kruntimes-demo';
const IMAGE = 'ghcr.io/kruntimes/kruntimes:dev';
type Status = KubeObject & { status?: { availableReplicas?: number; succeeded?: number; failed?: number; conditions?: { type: string; status: string }[] } };

async function until<T>(what: string, fn: () => Promise<T | undefined>, say: (m: string) => void, timeoutMs = 120_000): Promise<T> {
  const start = Date.now();
  let last = start;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() - start > timeoutMs) throw new Error(`demo: timed out waiting for ${what}`);
    if (Date.now() - last > 3000) { say(`waiting for ${what}...`); last = Date.now(); }
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function reset(env: Env): Promise<void> {
  try { await env.admin.delete(`/api/v1/namespaces/${NS}`); } catch (err) { if (!isApiError(err, 404)) throw err; }
  await until('the previous demo namespace to be deleted', async () => {
    try { await env.admin.get(`/api/v1/namespaces/${NS}`); return undefined; } catch (err) { return isApiError(err, 404) ? true : undefined; }
  }, () => undefined);
  await env.admin.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
  await until('the default ServiceAccount', () => env.admin.get(`/api/v1/namespaces/${NS}/serviceaccounts/default`), () => undefined);
}

function deployment(): object {
  return { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'demo-server' }, spec: {
    replicas: 2, selector: { matchLabels: { app: 'demo-server' } },
    template: { metadata: { labels: { app: 'demo-server' } }, spec: { containers: [{
      name: 'server', image: IMAGE, args: ['demo-server', '8080'], ports: [{ containerPort: 8080, name: 'http' }],
      readinessProbe: { httpGet: { path: '/healthz', port: 'http' }, periodSeconds: 1 },
      env: [{ name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } }],
    }] } } } };
}

function job(): object {
  return { apiVersion: 'batch/v1', kind: 'Job', metadata: { name: 'demo-job' }, spec: { backoffLimit: 1, template: { spec: {
    restartPolicy: 'Never', containers: [{ name: 'job', image: IMAGE, args: ['demo-job'], env: [{ name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } }] }],
  } } } };
}

export async function runDemo(env: Env, say: (m: string) => void): Promise<void> {
  const t0 = Date.now();
  const api = env.admin;
  say(`demo: namespace ${NS}`);
  await reset(env);
  await api.create(`/apis/apps/v1/namespaces/${NS}/deployments`, deployment());
  await api.create(`/apis/batch/v1/namespaces/${NS}/jobs`, job());
  say('demo: created Deployment demo-server (2 replicas) and Job demo-job');
  await until('Deployment demo-server to be available', async () => {
    const d = await api.get<Status>(`/apis/apps/v1/namespaces/${NS}/deployments/demo-server`);
    return d.status?.availableReplicas === 2 ? d : undefined;
  }, say);
  say(`demo: Deployment demo-server available (2/2 ready) after ${Date.now() - t0} ms`);
  const j = await until('Job demo-job to finish', async () => {
    const x = await api.get<Status>(`/apis/batch/v1/namespaces/${NS}/jobs/demo-job`);
    return x.status?.conditions?.some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True') ? x : undefined;
  }, say);
  const ok = j.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True');
  say(`demo: Job demo-job ${ok ? 'completed' : 'FAILED'} after ${Date.now() - t0} ms`);
  const pods = await api.list(`/api/v1/namespaces/${NS}/pods`, { labelSelector: 'job-name=demo-job' });
  for (const p of pods.items) {
    process.stdout.write(`--- logs of pod ${p.metadata.name} (via the API server, pods/log) ---\n`);
    process.stdout.write(await api.getText(`/api/v1/namespaces/${NS}/pods/${p.metadata.name}/log`));
  }
  if (!ok) throw new Error('demo: the Job failed');
  process.stdout.write(`demo finished in ${Date.now() - t0} ms. Try: kubectl get pods -n ${NS} -o wide\n`);
}
