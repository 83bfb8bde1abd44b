/**
 * Installs the devws Git Server component (kustomize/components/devws-git-server) into a local
 * environment, as an installation adds it to its overlay: rendered by the pinned kubectl's
 * kustomize, with what differs on the local environment (node agent: Pods are host processes,
 * nothing dials a ClusterIP): the Service becomes `ExternalName: localhost`, the server listens at
 * a port of the environment's choosing, on every address as in its Pod (the node agent probes the
 * Pod's own loopback address, clients reach it at localhost; Pod Security forbids a probe `host`). Its serving certificate is the one the
 * tls-certificates function issued (git.crt/git.key of kruntimes-extension-tls); the installer
 * creates the sync token Secret when there is none and writes the ConfigMap kruntimes-devws
 * (gitServerUrl, gitServerCA: the Secret's CA bundle) that devws-sync and the controller read.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import type { KubeClient } from '../lib/kube/client.ts';
import { isApiError } from '../lib/kube/errors.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { KRUNTIMES_NS, run } from './install.ts';
import { REPO_ROOT } from './paths.ts';
import { waitFor } from './process.ts';

type Doc = KubeObject & Record<string, unknown>;
type EnvVar = { name: string; value?: string };
type Container = {
  env?: EnvVar[];
  ports?: { name?: string; containerPort: number }[];
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
};
type PodSpec = { containers: Container[]; volumes?: Record<string, unknown>[] };

export const GIT_COMPONENT = 'kustomize/components/devws-git-server';
/** The component's Deployment and Service (the tls-certificates function issues its certificate for this name). */
export const GIT_SERVER_SERVICE = 'kruntimes-devws-git';
/** The Secret the tls-certificates function keeps: the Git Server's pair (git.crt, git.key) and the CA bundle. */
export const TLS_SECRET = 'kruntimes-extension-tls';
export const SYNC_SECRET = 'kruntimes-devws-git-sync';
export const DEVWS_CONFIG = 'kruntimes-devws';
/** The ConfigMap of the CA the external repositories' certificates chain to (a private CA). */
export const EXTERNAL_CA_CONFIG = 'kruntimes-devws-git-external-ca';
const EXTERNAL_CA_DIR = '/etc/kruntimes/external-ca';

export interface GitServerLocalization {
  port: number;
  /** CIDRs a sync may fetch from although internal (KRT_GIT_SYNC_ALLOW): the host's own repositories. */
  allow?: string;
  /** Mount the ConfigMap EXTERNAL_CA_CONFIG and trust it for external repositories (KRT_GIT_EXTERNAL_CA). */
  externalCA?: boolean;
}

const setEnv = (c: Container, vars: EnvVar[]): void => {
  const names = new Set(vars.map((v) => v.name));
  c.env = [...(c.env ?? []).filter((e) => !names.has(e.name)), ...vars];
};

/** The component's objects as they run on the local environment (pure). */
export function localizeGitServer(docs: Doc[], o: GitServerLocalization): Doc[] {
  for (const d of docs) {
    if (d.kind === 'Service' && d.metadata.name === GIT_SERVER_SERVICE)
      d.spec = { type: 'ExternalName', externalName: 'localhost' };
    if (d.kind !== 'Deployment' || d.metadata.name !== GIT_SERVER_SERVICE) continue;
    const pod = (d.spec as { template: { spec: PodSpec } }).template.spec;
    const c = pod.containers[0];
    if (!c) continue;
    c.ports = (c.ports ?? []).map((p) => (p.name === 'https' ? { ...p, containerPort: o.port } : p));
    setEnv(c, [
      { name: 'KRT_GIT_PORT', value: String(o.port) },
      ...(o.allow ? [{ name: 'KRT_GIT_SYNC_ALLOW', value: o.allow }] : []),
      ...(o.externalCA ? [{ name: 'KRT_GIT_EXTERNAL_CA', value: `${EXTERNAL_CA_DIR}/ca.crt` }] : []),
    ]);
    if (o.externalCA) {
      c.volumeMounts = [...(c.volumeMounts ?? []), { name: 'external-ca', mountPath: EXTERNAL_CA_DIR, readOnly: true }];
      pod.volumes = [...(pod.volumes ?? []), { name: 'external-ca', configMap: { name: EXTERNAL_CA_CONFIG } }];
    }
  }
  return docs;
}

/** `kubectl kustomize` of a kustomization that adds the component, with the local image tag. */
export async function renderGitServer(kubectl: string): Promise<Doc[]> {
  const dir = mkdtempSync(join(tmpdir(), 'krt-git-component-'));
  try {
    const component = relative(dir, join(REPO_ROOT, GIT_COMPONENT));
    const kustomization = {
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      components: [component],
      images: [{ name: 'ghcr.io/kruntimes/kruntimes', newTag: 'dev' }],
    };
    writeFileSync(join(dir, 'kustomization.yaml'), stringify(kustomization));
    const yaml = await run(kubectl, ['kustomize', dir], process.env);
    return parseAllDocuments(yaml)
      .map((d) => d.toJSON() as Doc)
      .filter(Boolean);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function upsert(api: KubeClient, kind: 'configmaps' | 'secrets', body: Doc, replace: boolean): Promise<void> {
  const base = `/api/v1/namespaces/${KRUNTIMES_NS}/${kind}`;
  await api.create(base, body).catch(async (err: unknown) => {
    if (!isApiError(err, 409)) throw err;
    if (replace) await api.patch(`${base}/${body.metadata.name ?? ''}`, body);
  });
}

export interface GitServerInstall extends GitServerLocalization {
  kubectl: string;
  kubeconfig: string;
  api: KubeClient;
  /** The PEM of externalCA (written to EXTERNAL_CA_CONFIG). */
  externalCAPem?: string;
  progress?: (m: string) => void;
}

type EventLike = KubeObject & { involvedObject?: { kind?: string; name?: string }; reason?: string; message?: string };

/** What the API says of one read, or why it could not say (the report must not fail on a read). */
const said = <T>(p: Promise<T>): Promise<T | string> =>
  p.catch((err: unknown) => `unreadable: ${err instanceof Error ? err.message : String(err)}`);

/**
 * The Git Server's Deployment, Pods (status and the last lines of their log) and volume, and the
 * Events about them, as the API shows them: for an installation that does not come up.
 */
export async function whyNotAvailable(api: KubeClient): Promise<string> {
  const base = `/api/v1/namespaces/${KRUNTIMES_NS}`;
  const pods = await api
    .list<KubeObject & { status?: unknown }>(`${base}/pods`, {
      labelSelector: `app.kubernetes.io/name=${GIT_SERVER_SERVICE}`,
    })
    .then((l) => l.items)
    .catch(() => []);
  const logs = await Promise.all(
    pods.map((p) => said(api.getText(`${base}/pods/${p.metadata.name ?? ''}/log`, { tailLines: '20' }))),
  );
  const events = await said(
    api
      .list<EventLike>(`${base}/events`)
      .then((l) =>
        l.items
          .filter((e) => (e.involvedObject?.name ?? '').startsWith(GIT_SERVER_SERVICE))
          .map(
            (e) =>
              `${e.involvedObject?.kind ?? ''}/${e.involvedObject?.name ?? ''} ${e.reason ?? ''}: ${e.message ?? ''}`,
          ),
      ),
  );
  const deployment = await said(
    api.get<KubeObject & { status?: unknown }>(
      `/apis/apps/v1/namespaces/${KRUNTIMES_NS}/deployments/${GIT_SERVER_SERVICE}`,
    ),
  );
  const pvc = await said(
    api.get<KubeObject & { status?: unknown }>(`${base}/persistentvolumeclaims/${GIT_SERVER_SERVICE}`),
  );
  const status = (o: unknown): unknown => (typeof o === 'string' ? o : (o as { status?: unknown }).status);
  return JSON.stringify({
    deployment: status(deployment),
    pods: pods.map((p, i) => ({ name: p.metadata.name, status: p.status, log: logs[i] })),
    volume: status(pvc),
    events,
  });
}

/** Installs the component and configures devws for it: its URL and the CA of its certificate. */
export async function installGitServer(o: GitServerInstall): Promise<{ url: string; ca: string }> {
  const docs = localizeGitServer(await renderGitServer(o.kubectl), { ...o, externalCA: !!o.externalCAPem });
  const token = randomBytes(32).toString('hex');
  await upsert(o.api, 'secrets', { metadata: { name: SYNC_SECRET }, stringData: { token } }, false);
  if (o.externalCAPem)
    await upsert(
      o.api,
      'configmaps',
      { metadata: { name: EXTERNAL_CA_CONFIG }, data: { 'ca.crt': o.externalCAPem } },
      true,
    );
  const env = { ...process.env, KUBECONFIG: o.kubeconfig };
  const apply = ['apply', '--server-side', '--force-conflicts', '--field-manager=kruntimes-local', '-f', '-'];
  await run(o.kubectl, apply, env, docs.map((d) => stringify(d)).join('---\n'));
  const deployment = `/apis/apps/v1/namespaces/${KRUNTIMES_NS}/deployments/${GIT_SERVER_SERVICE}`;
  await waitFor(
    'the devws Git Server to be available',
    async () => {
      const d = await o.api.get<KubeObject & { status?: { availableReplicas?: number } }>(deployment);
      return (d.status?.availableReplicas ?? 0) >= 1;
    },
    120_000,
    o.progress,
  ).catch(async (err: unknown) => {
    throw new Error(`${err instanceof Error ? err.message : String(err)}: ${await whyNotAvailable(o.api)}`);
  });
  const tls = await o.api.get<KubeObject & { data?: Record<string, string> }>(
    `/api/v1/namespaces/${KRUNTIMES_NS}/secrets/${TLS_SECRET}`,
  );
  const ca = Buffer.from(tls.data?.['ca-bundle.crt'] ?? '', 'base64').toString('utf8');
  const url = `https://localhost:${o.port}`;
  const config = { metadata: { name: DEVWS_CONFIG }, data: { gitServerUrl: url, gitServerCA: ca } };
  await upsert(o.api, 'configmaps', config, true);
  return { url, ca };
}

/** Removes what installGitServer installed (the repositories' volume too). */
export async function uninstallGitServer(o: { kubectl: string; kubeconfig: string; api: KubeClient }): Promise<void> {
  const docs = await renderGitServer(o.kubectl);
  const env = { ...process.env, KUBECONFIG: o.kubeconfig };
  const del = ['delete', '--ignore-not-found', '--wait=false', '-f', '-'];
  await run(o.kubectl, del, env, docs.map((d) => stringify(d)).join('---\n'));
  const base = `/api/v1/namespaces/${KRUNTIMES_NS}`;
  for (const path of [`configmaps/${DEVWS_CONFIG}`, `configmaps/${EXTERNAL_CA_CONFIG}`, `secrets/${SYNC_SECRET}`])
    await o.api.delete(`${base}/${path}`).catch((err: unknown) => {
      if (!isApiError(err, 404)) throw err;
    });
}
