/** Helpers for e2e specs: namespaces, ServiceAccount clients, certificates, waiting. */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubeClient } from '../lib/kube/client.ts';
import { isApiError } from '../lib/kube/errors.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { issueCert } from '../localenv/pki.ts';
import { cluster, E2E_HOST_ADDRESS, E2E_ROOT } from './cluster.ts';

export function admin(): KubeClient {
  return cluster().admin;
}

/** Creates the object at `path` (in its collection), or patches the one a previous run left there. */
export async function upsert(path: string, body: KubeObject & Record<string, unknown>): Promise<void> {
  await admin()
    .create(path.slice(0, path.lastIndexOf('/')), body)
    .catch(async (err: unknown) => {
      if (!isApiError(err, 409)) throw err;
      await admin().patch(path, body);
    });
}

/** What the API server answered a call that should be refused: "code message", or "accepted". */
export async function refusal(client: KubeClient, call: (c: KubeClient) => Promise<unknown>): Promise<string> {
  try {
    await call(client);
  } catch (err) {
    if (isApiError(err)) return `${err.code} ${err.message}`;
    throw err;
  }
  return 'accepted';
}

/** Polls fn until it returns a value; on timeout the error names what was awaited, the last error,
 * and what `explain` says about the state then (e.g. the object's status), for CI logs. */
export async function eventually<T>(
  what: string,
  fn: () => Promise<T | undefined | false>,
  timeoutMs = 60_000,
  everyMs = 100,
  explain?: () => Promise<string>,
): Promise<T> {
  const start = Date.now();
  let lastErr: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      lastErr = err;
    }
    if (Date.now() - start > timeoutMs) {
      const seen = explain ? await explain().catch((err: unknown) => `(explain failed: ${String(err)})`) : '';
      const last = lastErr instanceof Error ? `: ${lastErr.message}` : '';
      throw new Error(`timed out waiting for ${what}${last}${seen ? `; last seen: ${seen}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

let nsCounter = 0;
/** A fresh namespace whose default ServiceAccount exists (avoids the SA admission race). */
export async function newNamespace(prefix: string): Promise<string> {
  const name = `${prefix}-${process.pid}-${++nsCounter}`;
  await admin().create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  await eventually(`default ServiceAccount in ${name}`, () =>
    admin().get<KubeObject>(`/api/v1/namespaces/${name}/serviceaccounts/default`),
  );
  return name;
}

export async function deleteNamespace(name: string): Promise<void> {
  try {
    await admin().delete(`/api/v1/namespaces/${name}`);
  } catch (err) {
    if (!isApiError(err, 404)) throw err;
  }
}

/** A client authenticated as a ServiceAccount through a TokenRequest. */
export async function serviceAccountClient(ns: string, sa: string): Promise<KubeClient> {
  const res = await admin().create<KubeObject & { status: { token: string } }>(
    `/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`,
    { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } },
  );
  return new KubeClient({
    server: cluster().server,
    ca: readFileSync(join(E2E_ROOT, 'pki', 'ca.crt')),
    token: res.status.token,
  });
}

export interface Pki {
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

/** A serving certificate signed by the cluster CA (e.g. for <svc>.<ns>.svc backends). */
export function servingCert(name: string, dns: string[]): Pki {
  const dir = join(E2E_ROOT, 'pki');
  issueCert(dir, {
    name,
    cn: dns[0] ?? name,
    usage: 'server',
    dns: [...dns, 'localhost'],
    ips: [...new Set(['127.0.0.1', E2E_HOST_ADDRESS])],
  });
  const r = (f: string): Buffer => readFileSync(join(dir, f));
  return { ca: r('ca.crt'), cert: r(`${name}.crt`), key: r(`${name}.key`) };
}

export function pkiFile(name: string): Buffer {
  return readFileSync(join(E2E_ROOT, 'pki', name));
}

export function kubectl(args: string[], input?: string): Promise<string> {
  const bin = join(cluster().state.binDir, 'kubectl');
  return new Promise((resolve, reject) => {
    const child = execFile(
      bin,
      args,
      { env: { ...process.env, KUBECONFIG: cluster().kubeconfig } },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`kubectl ${args.join(' ')}: ${stderr || err.message}`));
        else resolve(stdout);
      },
    );
    if (input !== undefined) child.stdin?.end(input);
  });
}

export type Obj = KubeObject & { spec?: Record<string, unknown>; status?: Record<string, unknown> };

/** Waits until the aggregated APIService v1alpha1.<group> reports Available. */
export async function apiServiceAvailable(group: string, timeoutMs = 60_000): Promise<void> {
  await eventually(
    `${group} APIService Available`,
    async () => {
      const s = await admin().get<{ metadata: object; status?: { conditions?: { type: string; status: string }[] } }>(
        `/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.${group}`,
      );
      return s.status?.conditions?.some((c) => c.type === 'Available' && c.status === 'True');
    },
    timeoutMs,
  );
}

const RELAY_LEASE = '/apis/coordination.k8s.io/v1/namespaces/kruntimes-system/leases/kruntimes-relay';

/**
 * Another relay took the Lease over (and handed it back): leaseTransitions, the controller's lease
 * epoch, goes up by one. The relay renews under its own identity and keeps the count. Returns the new epoch.
 */
export async function takeRelayLeaseOver(): Promise<number> {
  for (;;) {
    const lease = await admin().get<KubeObject & { spec: { leaseTransitions?: number } }>(RELAY_LEASE);
    const next = (lease.spec.leaseTransitions ?? 0) + 1;
    const patch = { metadata: { resourceVersion: lease.metadata.resourceVersion }, spec: { leaseTransitions: next } };
    const ok = await admin()
      .patch(RELAY_LEASE, patch)
      .then(() => true)
      .catch((err: unknown) => {
        if (isApiError(err, 409)) return false; // renewed meanwhile: read it again
        throw err;
      });
    if (ok) return next;
  }
}

type JobObj = Obj & { status?: { conditions?: { type: string; status: string }[] } };

/**
 * Runs a CronJob of kruntimes-system now, as `kubectl create job --from=cronjob/...` does (a Job
 * from its template, named `job`), and waits until the Job is Complete; a Failed Job fails the wait.
 */
export async function runCronJobNow(cronJob: string, job: string, timeoutMs = 90_000): Promise<void> {
  const base = '/apis/batch/v1/namespaces/kruntimes-system';
  const cj = await admin().get<Obj & { spec: { jobTemplate: { spec: Record<string, unknown> } } }>(
    `${base}/cronjobs/${cronJob}`,
  );
  await admin().create(`${base}/jobs`, {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: job, annotations: { 'cronjob.kubernetes.io/instantiate': 'manual' } },
    spec: cj.spec.jobTemplate.spec,
  });
  const done = (j: JobObj, type: string): boolean =>
    !!j.status?.conditions?.some((c) => c.type === type && c.status === 'True');
  await eventually(
    `Job ${job} (from CronJob ${cronJob}) to complete`,
    async () => {
      const j = await admin().get<JobObj>(`${base}/jobs/${job}`);
      if (done(j, 'Failed')) throw new Error(`Job ${job} failed`);
      return done(j, 'Complete');
    },
    timeoutMs,
  );
}
