/**
 * Cron function: keeps the extension API server's serving certificate (and those of the function
 * servers, the in-cluster dashboard and the devws Git Server) and every caBundle that
 * must trust it current, rotating without downtime. The serving certificate is renewed 30 days
 * before expiry from the same CA; the CA is renewed 90 days before expiry and, until the old
 * CA expires, caBundles carry both CAs so every client trusts the old and new serving cert.
 * caBundles are written into kruntimes' own webhook configuration and APIServices (by name,
 * and only while labelled kruntimes.io/inject-ca=true): the function reads and patches nothing
 * else, so its role is limited by resourceNames (a leaked token of it cannot re-point another
 * API group or webhook at a server of the attacker's choosing).
 */
import { R } from '../../lib/fn/resources.ts';
import type { CronInput, FunctionDef, Operation } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { createCa, issueServing, notAfter, splitBundle, type KeyPairPem } from '../../lib/tls/certs.ts';

export const NAMESPACE = 'kruntimes-system';
export const SECRET = 'kruntimes-extension-tls';
export const SERVICE = 'kruntimes-extension';
export const INJECT_LABEL = 'kruntimes.io/inject-ca';
/** The objects whose caBundle this function maintains (kustomize/base; scripts/gen-manifests.ts names the webhook). */
export const WEBHOOK_CONFIGURATIONS = ['kruntimes'];
export const API_SERVICES = [
  'v1alpha1.logs.kruntimes.io',
  'v1alpha1.sessions.kruntimes.io',
  'v1alpha1.artifacts.kruntimes.io',
];
const DAY = 86_400_000;

type Secret = KubeObject & { data?: Record<string, string> };
type Webhooks = KubeObject & { webhooks?: { clientConfig?: { caBundle?: string } }[] };
type ApiService = KubeObject & { spec?: { caBundle?: string } };

const b64 = (s: string): string => Buffer.from(s).toString('base64');
const unb64 = (s: string | undefined): string => (s ? Buffer.from(s, 'base64').toString('utf8') : '');

export interface Material {
  ca: KeyPairPem;
  caBundle: string;
  serving: KeyPairPem;
  /** The function servers' certificate (webhook transport): any Service of the namespace. Their
   * Pods mount only these two keys of the Secret (functions.crt, functions.key). */
  functions: KeyPairPem;
  /** The in-cluster dashboard's certificate (kustomize/components/dashboard): its Service only.
   * Its Pod mounts only these two keys (dashboard.crt, dashboard.key). */
  dashboard: KeyPairPem;
  /** The devws Git Server's certificate (kustomize/components/devws-git-server): its Service, and
   * localhost for the local environment, where its Service is `ExternalName: localhost`. Its Pod
   * mounts only these two keys (git.crt, git.key). */
  git: KeyPairPem;
}

/** The DNS names of the function servers' certificate: every Service of the kruntimes namespace. */
export const FUNCTION_SERVER_DNS = [`*.${NAMESPACE}.svc`, `*.${NAMESPACE}.svc.cluster.local`];

/** The dashboard's Service (kustomize/components/dashboard) and the DNS names its certificate carries. */
export const DASHBOARD_SERVICE = 'kruntimes-dashboard';
export const DASHBOARD_DNS = [
  `${DASHBOARD_SERVICE}.${NAMESPACE}.svc`,
  `${DASHBOARD_SERVICE}.${NAMESPACE}.svc.cluster.local`,
  DASHBOARD_SERVICE,
];

/** The devws Git Server's Service (kustomize/components/devws-git-server) and its certificate's names. */
export const GIT_SERVER_SERVICE = 'kruntimes-devws-git';
export const GIT_SERVER_DNS = [
  `${GIT_SERVER_SERVICE}.${NAMESPACE}.svc`,
  `${GIT_SERVER_SERVICE}.${NAMESPACE}.svc.cluster.local`,
  GIT_SERVER_SERVICE,
  'localhost',
];

type Leaf = 'serving' | 'functions' | 'dashboard' | 'git';

const renewLeaf = (leaf: KeyPairPem, now: Date): boolean => notAfter(leaf.cert).getTime() - now.getTime() < 30 * DAY;

/** The key pair stored under `<name>.crt` and `<name>.key`, when both are there. */
const pairOf = (d: Record<string, string>, name: string): KeyPairPem | undefined =>
  d[`${name}.crt`] && d[`${name}.key`] ? { cert: unb64(d[`${name}.crt`]), key: unb64(d[`${name}.key`]) } : undefined;

/** The leaf certificates of `ca`, each kept while valid for 30 more days, else issued anew. */
async function leaves(
  ca: KeyPairPem,
  held: Partial<Record<Leaf, KeyPairPem>>,
  now: Date,
): Promise<{ leaves: Pick<Material, Leaf>; changed: boolean }> {
  let changed = false;
  const leaf = async (have: KeyPairPem | undefined, cn: string, dns: string[], ips: string[]): Promise<KeyPairPem> => {
    if (have && !renewLeaf(have, now)) return have;
    changed = true;
    return issueServing(ca, cn, { dns, ips }, now, 365);
  };
  const dns = [`${SERVICE}.${NAMESPACE}.svc`, `${SERVICE}.${NAMESPACE}.svc.cluster.local`, SERVICE, 'localhost'];
  const serving = await leaf(held.serving, `${SERVICE}.${NAMESPACE}.svc`, dns, ['127.0.0.1']);
  const functions = await leaf(held.functions, `functions.${NAMESPACE}.svc`, FUNCTION_SERVER_DNS, []);
  const dashboard = await leaf(held.dashboard, `${DASHBOARD_SERVICE}.${NAMESPACE}.svc`, DASHBOARD_DNS, []);
  const git = await leaf(held.git, `${GIT_SERVER_SERVICE}.${NAMESPACE}.svc`, GIT_SERVER_DNS, ['127.0.0.1']);
  return { leaves: { serving, functions, dashboard, git }, changed };
}

/** Decides the material to hold now, reusing what is still valid. */
export async function desiredMaterial(
  current: Secret | undefined,
  now: Date,
): Promise<{ material: Material; changed: boolean }> {
  const d = current?.data ?? {};
  let ca = d['ca.crt'] && d['ca.key'] ? { cert: unb64(d['ca.crt']), key: unb64(d['ca.key']) } : undefined;
  let bundle = unb64(d['ca-bundle.crt']) || ca?.cert || '';
  let held: Partial<Record<Leaf, KeyPairPem>> = {
    serving: pairOf(d, 'tls'),
    functions: pairOf(d, 'functions'),
    dashboard: pairOf(d, 'dashboard'),
    git: pairOf(d, 'git'),
  };
  let changed = false;
  if (!ca || notAfter(ca.cert).getTime() - now.getTime() < 90 * DAY) {
    ca = await createCa('kruntimes-extension-ca', now, 3650);
    bundle = [ca.cert, ...splitBundle(bundle).filter((c) => notAfter(c).getTime() > now.getTime())].join('\n');
    held = {};
    changed = true;
  }
  const expired = splitBundle(bundle).filter((c) => notAfter(c).getTime() <= now.getTime());
  if (expired.length) {
    bundle = splitBundle(bundle)
      .filter((c) => !expired.includes(c))
      .join('\n');
    changed = true;
  }
  const issued = await leaves(ca, held, now);
  return {
    material: { ca, caBundle: bundle.trim() + '\n', ...issued.leaves },
    changed: changed || issued.changed,
  };
}

function caPatches(state: CronInput['state'], bundle: string): Operation[] {
  const want = b64(bundle);
  const ops: Operation[] = [];
  for (const r of [R.validatingWebhooks]) {
    for (const w of state.list(r, undefined, { [INJECT_LABEL]: 'true' }) as Webhooks[]) {
      if (!WEBHOOK_CONFIGURATIONS.includes(w.metadata.name ?? '')) continue;
      const hooks = w.webhooks ?? [];
      const patch = hooks.flatMap((h, i) =>
        h.clientConfig?.caBundle === want
          ? []
          : [{ op: 'add', path: `/webhooks/${i}/clientConfig/caBundle`, value: want }],
      );
      if (patch.length) ops.push({ op: 'patch', resource: r, name: w.metadata.name ?? '', patch, patchType: 'json' });
    }
  }
  for (const a of state.list(R.apiServices, undefined, { [INJECT_LABEL]: 'true' }) as ApiService[]) {
    if (API_SERVICES.includes(a.metadata.name ?? '') && a.spec?.caBundle !== want)
      ops.push({
        op: 'patch',
        resource: R.apiServices,
        name: a.metadata.name ?? '',
        patch: { spec: { caBundle: want } },
      });
  }
  return ops;
}

export async function rotate({ state, now }: CronInput): Promise<Operation[]> {
  const current = state.get(R.secrets, NAMESPACE, SECRET);
  const { material, changed } = await desiredMaterial(current, now);
  const ops: Operation[] = [];
  if (changed) {
    ops.push({
      op: 'apply',
      resource: R.secrets,
      object: {
        metadata: { name: SECRET, namespace: NAMESPACE, labels: { 'app.kubernetes.io/part-of': 'kruntimes' } },
        type: 'kubernetes.io/tls',
        data: {
          'tls.crt': b64(material.serving.cert),
          'tls.key': b64(material.serving.key),
          'functions.crt': b64(material.functions.cert),
          'functions.key': b64(material.functions.key),
          'dashboard.crt': b64(material.dashboard.cert),
          'dashboard.key': b64(material.dashboard.key),
          'git.crt': b64(material.git.cert),
          'git.key': b64(material.git.key),
          'ca.crt': b64(material.ca.cert),
          'ca.key': b64(material.ca.key),
          'ca-bundle.crt': b64(material.caBundle),
        },
      },
    });
  }
  return [...ops, ...caPatches(state, material.caBundle)];
}

const fn: FunctionDef = {
  name: 'tls-certificates',
  description: 'Issues and rotates the extension API server certificate and injects caBundles.',
  trigger: {
    type: 'cron',
    schedule: '17 3 * * *',
    reads: [
      { resource: R.secrets, namespace: NAMESPACE, name: SECRET },
      ...WEBHOOK_CONFIGURATIONS.map((name) => ({ resource: R.validatingWebhooks, name })),
      ...API_SERVICES.map((name) => ({ resource: R.apiServices, name })),
    ],
  },
  rbac: [
    // create cannot be limited by name (the name is not known before the object exists); it can
    // only add a Secret, never change one.
    { apiGroups: [''], resources: ['secrets'], verbs: ['create'], scope: 'namespace' },
    {
      apiGroups: [''],
      resources: ['secrets'],
      verbs: ['get', 'patch'],
      resourceNames: [SECRET],
      scope: 'namespace',
    },
    {
      apiGroups: ['admissionregistration.k8s.io'],
      resources: ['validatingwebhookconfigurations'],
      verbs: ['get', 'patch'],
      resourceNames: WEBHOOK_CONFIGURATIONS,
    },
    {
      apiGroups: ['apiregistration.k8s.io'],
      resources: ['apiservices'],
      verbs: ['get', 'patch'],
      resourceNames: API_SERVICES,
    },
  ],
  handler: rotate,
};
export default fn;
