/**
 * Cron function: keeps the extension API server's serving certificate and every caBundle that
 * must trust it current, rotating without downtime. The serving certificate is renewed 30 days
 * before expiry from the same CA; the CA is renewed 90 days before expiry and, until the old
 * CA expires, caBundles carry both CAs so every client trusts the old and new serving cert.
 * caBundles are written into webhook configurations and APIServices labelled
 * kruntimes.io/inject-ca=true.
 */
import { R } from '../../lib/fn/resources.ts';
import type { CronInput, FunctionDef, Operation } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { createCa, issueServing, notAfter, splitBundle, type KeyPairPem } from '../../lib/tls/certs.ts';

export const NAMESPACE = 'kruntimes-system';
export const SECRET = 'kruntimes-extension-tls';
export const SERVICE = 'kruntimes-extension';
export const INJECT_LABEL = 'kruntimes.io/inject-ca';
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
}

/** Decides the material to hold now, reusing what is still valid. */
export async function desiredMaterial(
  current: Secret | undefined,
  now: Date,
): Promise<{ material: Material; changed: boolean }> {
  const d = current?.data ?? {};
  let ca: KeyPairPem | undefined =
    d['ca.crt'] && d['ca.key'] ? { cert: unb64(d['ca.crt']), key: unb64(d['ca.key']) } : undefined;
  let bundle = unb64(d['ca-bundle.crt']) || ca?.cert || '';
  let serving: KeyPairPem | undefined =
    d['tls.crt'] && d['tls.key'] ? { cert: unb64(d['tls.crt']), key: unb64(d['tls.key']) } : undefined;
  let changed = false;
  if (!ca || notAfter(ca.cert).getTime() - now.getTime() < 90 * DAY) {
    ca = await createCa('kruntimes-extension-ca', now, 3650);
    bundle = [ca.cert, ...splitBundle(bundle).filter((c) => notAfter(c).getTime() > now.getTime())].join('\n');
    serving = undefined;
    changed = true;
  }
  const expired = splitBundle(bundle).filter((c) => notAfter(c).getTime() <= now.getTime());
  if (expired.length) {
    bundle = splitBundle(bundle)
      .filter((c) => !expired.includes(c))
      .join('\n');
    changed = true;
  }
  if (!serving || notAfter(serving.cert).getTime() - now.getTime() < 30 * DAY) {
    const dns = [`${SERVICE}.${NAMESPACE}.svc`, `${SERVICE}.${NAMESPACE}.svc.cluster.local`, SERVICE, 'localhost'];
    serving = await issueServing(ca, `${SERVICE}.${NAMESPACE}.svc`, { dns, ips: ['127.0.0.1'] }, now, 365);
    changed = true;
  }
  return { material: { ca, caBundle: bundle.trim() + '\n', serving }, changed };
}

function caPatches(state: CronInput['state'], bundle: string): Operation[] {
  const want = b64(bundle);
  const ops: Operation[] = [];
  for (const r of [R.validatingWebhooks, R.mutatingWebhooks]) {
    for (const w of state.list(r, undefined, { [INJECT_LABEL]: 'true' }) as Webhooks[]) {
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
    if (a.spec?.caBundle !== want)
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
      { resource: R.secrets, namespace: NAMESPACE },
      { resource: R.validatingWebhooks, labelSelector: `${INJECT_LABEL}=true` },
      { resource: R.mutatingWebhooks, labelSelector: `${INJECT_LABEL}=true` },
      { resource: R.apiServices, labelSelector: `${INJECT_LABEL}=true` },
    ],
  },
  rbac: [
    { apiGroups: [''], resources: ['secrets'], verbs: ['list', 'get', 'create', 'patch'], scope: 'namespace' },
    {
      apiGroups: ['admissionregistration.k8s.io'],
      resources: ['validatingwebhookconfigurations', 'mutatingwebhookconfigurations'],
      verbs: ['list', 'patch'],
    },
    { apiGroups: ['apiregistration.k8s.io'], resources: ['apiservices'], verbs: ['list', 'patch'] },
  ],
  handler: rotate,
};
export default fn;
