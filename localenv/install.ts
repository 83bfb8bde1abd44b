/**
 * Installs kruntimes into a local environment from the `local` kustomize overlay, with the
 * one thing that differs per environment: the loopback port of the extension API server
 * (each environment on this host has its own). Rendered by the pinned kubectl's kustomize,
 * applied server-side, then waited for.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import type { KubeClient } from '../lib/kube/client.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { POD_GATEWAY } from './kubelet-config.ts';
import { REPO_ROOT } from './paths.ts';
import { waitFor } from './process.ts';

export const EXTENSION_SERVICE = 'kruntimes-extension';
export const KRUNTIMES_NS = 'kruntimes-system';
type Doc = KubeObject & Record<string, unknown>;

/** Runs a tool (kubectl, kustomize) and resolves with its stdout; its stderr is the error's message. */
export function run(bin: string, args: string[], env: NodeJS.ProcessEnv, input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(bin, args, { env, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${args.slice(0, 2).join(' ')}: ${stderr || err.message}`));
      else resolve(stdout);
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

type ServiceRef = { name?: string; namespace?: string; port?: number };

/** Points every reference to the extension Service at the environment's port. */
export function localizePorts(docs: Doc[], port: number): Doc[] {
  const fix = (svc: ServiceRef | undefined): void => {
    if (svc?.name === EXTENSION_SERVICE && svc.namespace === KRUNTIMES_NS) svc.port = port;
  };
  for (const d of docs) {
    if (d.kind === 'ValidatingWebhookConfiguration' || d.kind === 'MutatingWebhookConfiguration') {
      for (const w of (d.webhooks as { clientConfig?: { service?: ServiceRef } }[] | undefined) ?? [])
        fix(w.clientConfig?.service);
    }
    if (d.kind === 'APIService') fix((d.spec as { service?: ServiceRef }).service);
    if (d.kind === 'Deployment' && d.metadata.name === EXTENSION_SERVICE) {
      const c = (d.spec as { template: { spec: { containers: { env?: { name: string; value?: string }[] }[] } } })
        .template.spec.containers[0];
      if (c)
        c.env = [
          ...(c.env ?? []).filter((e) => e.name !== 'KRT_HTTPS_PORT'),
          { name: 'KRT_HTTPS_PORT', value: String(port) },
        ];
    }
  }
  return docs;
}

/**
 * On the kubelet node kind Pods have their own network namespaces, and kruntimes-system's
 * `restricted` Pod Security forbids hostNetwork: the extension server listens on its Pod IP
 * (all addresses, not the overlay's 127.0.0.1) and node-services relays 127.0.0.1:<port>,
 * where the API server calls it (ExternalName localhost), to that Pod. A local OpenSandbox server
 * (plain HTTP, allowed for the overlay's 127.0.0.1) is reached from a Pod at the bridge gateway,
 * the host as Pods see it: that address is allowed too.
 */
export function localizeForKubelet(docs: Doc[]): Doc[] {
  for (const d of docs) {
    if (d.kind !== 'Deployment' || (d.metadata.name !== EXTENSION_SERVICE && d.metadata.name !== FUNCTIONS_DEPLOYMENT))
      continue;
    const c = (d.spec as { template: { spec: { containers: { env?: EnvVar[] }[] } } }).template.spec.containers[0];
    if (!c) continue;
    if (d.metadata.name === EXTENSION_SERVICE) c.env = (c.env ?? []).filter((e) => e.name !== 'KRT_LISTEN_ADDRESS');
    c.env = (c.env ?? []).map((e) =>
      e.name === 'KRT_OPENSANDBOX_INSECURE_HOSTS' && e.value !== undefined
        ? { ...e, value: [...new Set([...e.value.split(','), POD_GATEWAY])].join(',') }
        : e,
    );
  }
  return docs;
}
export const FUNCTIONS_DEPLOYMENT = 'kruntimes-functions';

/**
 * KRT_FUNCTION_TRANSPORT=webhook: the relay invokes every watch function over the webhook
 * transport and the local overlay's function server (idle by default) runs one replica.
 * Configuration only: the same manifests with an env var and a replica count changed.
 */
export function functionTransport(docs: Doc[], transport: string | undefined): Doc[] {
  if (!transport || transport === 'inprocess') return docs;
  if (transport !== 'webhook') throw new Error(`KRT_FUNCTION_TRANSPORT must be inprocess or webhook, got ${transport}`);
  for (const d of docs) {
    if (d.kind !== 'Deployment') continue;
    const spec = d.spec as { replicas?: number; template: { spec: { containers: { env?: EnvVar[] }[] } } };
    if (d.metadata.name === FUNCTIONS_DEPLOYMENT) spec.replicas = Math.max(1, spec.replicas ?? 0);
    const c = spec.template.spec.containers[0];
    if (d.metadata.name === EXTENSION_SERVICE && c)
      c.env = [
        ...(c.env ?? []).filter((e) => e.name !== 'KRT_FUNCTION_TRANSPORT'),
        { name: 'KRT_FUNCTION_TRANSPORT', value: transport },
      ];
  }
  return docs;
}
type EnvVar = { name: string; value?: string };

export const LOCAL_OVERLAY = 'kustomize/overlays/local';

export async function renderLocal(kubectl: string, port: number, overlay = LOCAL_OVERLAY): Promise<Doc[]> {
  const yaml = await run(kubectl, ['kustomize', join(REPO_ROOT, overlay)], process.env);
  const docs = parseAllDocuments(yaml)
    .map((d) => d.toJSON() as Doc)
    .filter(Boolean);
  return functionTransport(localizePorts(docs, port), process.env.KRT_FUNCTION_TRANSPORT);
}

async function renderForNode(
  kubectl: string,
  port: number,
  overlay: string,
  kind?: 'agent' | 'kubelet',
): Promise<Doc[]> {
  const docs = await renderLocal(kubectl, port, overlay);
  return kind === 'kubelet' ? localizeForKubelet(docs) : docs;
}

async function condition(api: KubeClient, path: string, type: string): Promise<boolean> {
  const o = await api.get<KubeObject & { status?: { conditions?: { type: string; status: string }[] } }>(path);
  return !!o.status?.conditions?.some((c) => c.type === type && c.status === 'True');
}

export async function installKruntimes(o: {
  kubectl: string;
  kubeconfig: string;
  api: KubeClient;
  port: number;
  progress: (m: string) => void;
  /** Relative to the repository root; the e2e suite adds its sample functions (e2e/fixtures/kustomize). */
  overlay?: string;
  nodeKind?: 'agent' | 'kubelet';
}): Promise<void> {
  const overlay = o.overlay ?? LOCAL_OVERLAY;
  const docs = await renderForNode(o.kubectl, o.port, overlay, o.nodeKind);
  o.progress(`installing kruntimes from ${overlay} (${docs.length} objects)`);
  const env = { ...process.env, KUBECONFIG: o.kubeconfig };
  const crds = docs.filter((d) => d.kind === 'CustomResourceDefinition');
  await run(
    o.kubectl,
    ['apply', '--server-side', '--force-conflicts', '--field-manager=kruntimes-local', '-f', '-'],
    env,
    crds.map((d) => stringify(d)).join('---\n'),
  );
  for (const c of crds)
    await waitFor(
      `CRD ${c.metadata.name} Established`,
      () =>
        condition(o.api, `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${c.metadata.name}`, 'Established'),
      30_000,
    );
  const rest = docs.filter((d) => d.kind !== 'CustomResourceDefinition');
  await run(
    o.kubectl,
    ['apply', '--server-side', '--force-conflicts', '--field-manager=kruntimes-local', '-f', '-'],
    env,
    rest.map((d) => stringify(d)).join('---\n'),
  );
  await waitFor(
    'the TLS certificate Job',
    () => condition(o.api, `/apis/batch/v1/namespaces/${KRUNTIMES_NS}/jobs/kruntimes-tls-init`, 'Complete'),
    120_000,
    o.progress,
  );
  await waitFor(
    'the extension API server to be available',
    async () => {
      const d = await o.api.get<
        KubeObject & { status?: { availableReplicas?: number; updatedReplicas?: number; replicas?: number } }
      >(`/apis/apps/v1/namespaces/${KRUNTIMES_NS}/deployments/${EXTENSION_SERVICE}`);
      return (d.status?.availableReplicas ?? 0) >= 1 && d.status?.updatedReplicas === d.status?.replicas;
    },
    120_000,
    o.progress,
  );
  for (const a of docs.filter((d) => d.kind === 'APIService')) {
    await waitFor(
      `APIService ${a.metadata.name} to be Available`,
      () => condition(o.api, `/apis/apiregistration.k8s.io/v1/apiservices/${a.metadata.name}`, 'Available'),
      60_000,
      o.progress,
    );
  }
}
