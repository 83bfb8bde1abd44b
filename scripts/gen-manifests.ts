/**
 * Renders kustomize/base/generated/functions.yaml from the functions' own declarations: one
 * ServiceAccount per function bound to exactly its declared rules (the extension API server
 * hosting the watch and admission functions impersonates those of the functions it hosts and
 * holds none of their rules itself), a CronJob per cron function, a one-shot Job issuing the
 * TLS certificate at install, and the ValidatingWebhookConfiguration of the admission
 * functions; and, from the e2e suite's sample functions, e2e/fixtures/kustomize/generated.yaml.
 * `--check` fails when a committed file is stale.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import {
  admissionFunctions,
  cronFunctions,
  EXTRA_DIRS_ENV,
  FUNCTION_SA_PREFIX,
  FUNCTIONS_DIR,
  loadFunctions,
  watchFunctions,
} from '../apiserver/functions.ts';
import type { AdmissionFunction, CronFunction, FunctionDef, Rule, WatchFunction } from '../lib/fn/types.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import { FUNCTION_SERVICE_LABEL } from '../apiserver/transport.ts';
import { WEBHOOK_CONFIGURATIONS } from '../functions/tls-certificates/index.ts';

export const NS = 'kruntimes-system';
export const IMAGE = 'ghcr.io/kruntimes/kruntimes:0.1.0';
/** The e2e suite's sample functions, relative to the repository root. */
export const FIXTURE_FUNCTIONS = 'e2e/fixtures/functions';
const LABELS = { 'app.kubernetes.io/part-of': 'kruntimes' };
type Doc = Record<string, unknown>;

const strip = (r: Rule): Doc => ({
  apiGroups: r.apiGroups,
  resources: r.resources,
  verbs: r.verbs,
  ...(r.resourceNames ? { resourceNames: r.resourceNames } : {}),
});

function roles(name: string, sa: string, rules: Rule[]): Doc[] {
  const cluster = rules.filter((r) => r.scope !== 'namespace').map(strip);
  const local = rules.filter((r) => r.scope === 'namespace').map(strip);
  const subject = [{ kind: 'ServiceAccount', name: sa, namespace: NS }];
  const out: Doc[] = [];
  if (cluster.length) {
    out.push({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name, labels: LABELS },
      rules: cluster,
    });
    out.push({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name, labels: LABELS },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
      subjects: subject,
    });
  }
  if (local.length) {
    out.push({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name, namespace: NS, labels: LABELS },
      rules: local,
    });
    out.push({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name, namespace: NS, labels: LABELS },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: subject,
    });
  }
  return out;
}

type EnvVar = { name: string; value: string };

function podSpec(fn: CronFunction, sa: string, env: EnvVar[]): Doc {
  return {
    serviceAccountName: sa,
    restartPolicy: 'Never',
    automountServiceAccountToken: true,
    securityContext: { runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } },
    containers: [
      {
        name: 'fn',
        image: IMAGE,
        args: ['fn', 'run', fn.name],
        ...(env.length ? { env } : {}),
        resources: { requests: { cpu: '50m', memory: '96Mi' }, limits: { memory: '256Mi' } },
        securityContext: {
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ['ALL'] },
        },
      },
    ],
  };
}

function cron(fn: CronFunction, env: EnvVar[] = []): Doc[] {
  const sa = `${FUNCTION_SA_PREFIX}${fn.name}`;
  const docs: Doc[] = [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: sa, namespace: NS, labels: LABELS } },
    ...roles(`kruntimes:fn:${fn.name}`, sa, fn.rbac),
  ];
  docs.push({
    apiVersion: 'batch/v1',
    kind: 'CronJob',
    metadata: {
      name: `kruntimes-fn-${fn.name}`,
      namespace: NS,
      labels: { ...LABELS, 'kruntimes.io/function': fn.name },
    },
    spec: {
      schedule: fn.trigger.schedule,
      concurrencyPolicy: 'Forbid',
      successfulJobsHistoryLimit: 1,
      failedJobsHistoryLimit: 3,
      jobTemplate: {
        spec: {
          backoffLimit: 3,
          activeDeadlineSeconds: 600,
          ttlSecondsAfterFinished: 3600,
          template: { metadata: { labels: { 'kruntimes.io/function': fn.name } }, spec: podSpec(fn, sa, env) },
        },
      },
    },
  });
  if (fn.name === 'tls-certificates') {
    docs.push({
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name: 'kruntimes-tls-init', namespace: NS, labels: { ...LABELS, 'kruntimes.io/function': fn.name } },
      spec: {
        backoffLimit: 10,
        template: { metadata: { labels: { 'kruntimes.io/function': fn.name } }, spec: podSpec(fn, sa, env) },
      },
    });
  }
  return docs;
}

function webhooks(fns: FunctionDef[], name: string): Doc[] {
  const adm = admissionFunctions(fns);
  if (!adm.length) return [];
  return [
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingWebhookConfiguration',
      // The tls-certificates function may patch only the configurations it declares (WEBHOOK_CONFIGURATIONS).
      metadata: { name, labels: { ...LABELS, 'kruntimes.io/inject-ca': 'true' } },
      webhooks: adm
        .filter((f) => f.trigger.webhook === 'validating')
        .map((f) => ({
          name: `${f.name}.kruntimes.io`,
          admissionReviewVersions: ['v1'],
          sideEffects: f.trigger.sideEffects ?? 'None',
          failurePolicy: f.trigger.failurePolicy,
          timeoutSeconds: f.trigger.timeoutSeconds,
          matchPolicy: 'Equivalent',
          rules: f.trigger.rules,
          ...(f.trigger.objectSelector ? { objectSelector: f.trigger.objectSelector } : {}),
          ...(f.trigger.matchConditions ? { matchConditions: f.trigger.matchConditions } : {}),
          namespaceSelector: {
            matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system', NS] }],
          },
          clientConfig: {
            service: { namespace: NS, name: 'kruntimes-extension', path: `/admission/${f.name}`, port: 443 },
          },
        })),
    },
  ];
}

/**
 * A watch or admission function's own identity: a ServiceAccount no Pod gets a token of, bound to
 * exactly the function's declared rules. The relay impersonates a watch function's to apply its
 * operations and make its live reads (its function server Pods need no API access); the admission
 * router impersonates an admission function's for its handler's reads and SubjectAccessReviews.
 */
function functionIdentity(fn: WatchFunction | AdmissionFunction): Doc[] {
  const sa = `${FUNCTION_SA_PREFIX}${fn.name}`;
  return [
    {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: sa, namespace: NS, labels: { ...LABELS, 'kruntimes.io/function': fn.name } },
      automountServiceAccountToken: false,
    },
    ...roles(`kruntimes:fn:${fn.name}`, sa, fn.rbac),
  ];
}

/**
 * What the relay itself may do for its watch functions: list and watch the kinds it caches
 * (their triggers and `also` kinds; never a `fetch` kind such as Secrets), watch the function
 * server Pods of its namespace (webhook transport endpoints), and impersonate exactly their ServiceAccounts. Every write
 * and every live read is made as the function.
 */
export function relayRules(watch: WatchFunction[]): Rule[] {
  const kinds = new Map<string, Rule>();
  for (const r of watch.flatMap((f) => [f.trigger.resource, ...(f.trigger.also ?? []).map((a) => a.resource)]))
    kinds.set(`${r.group}/${r.resource}`, { apiGroups: [r.group], resources: [r.resource], verbs: ['list', 'watch'] });
  const sorted = [...kinds.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, r]) => r);
  return [
    ...sorted,
    { apiGroups: [''], resources: ['pods'], verbs: ['list', 'watch'], scope: 'namespace' },
    ...(watch.length
      ? [
          {
            apiGroups: [''],
            resources: ['serviceaccounts'],
            verbs: ['impersonate'],
            resourceNames: watch.map((f) => `${FUNCTION_SA_PREFIX}${f.name}`),
            scope: 'namespace' as const,
          },
        ]
      : []),
  ];
}

/** What the admission router itself may do for its functions: impersonate exactly their ServiceAccounts. */
export function admissionRules(adm: AdmissionFunction[]): Rule[] {
  if (!adm.length) return [];
  const names = adm.map((f) => `${FUNCTION_SA_PREFIX}${f.name}`);
  return [
    {
      apiGroups: [''],
      resources: ['serviceaccounts'],
      verbs: ['impersonate'],
      resourceNames: names,
      scope: 'namespace',
    },
  ];
}

/** The production manifests: the functions in functions/ only. */
export async function render(): Promise<string> {
  const fns = await loadFunctions(FUNCTIONS_DIR);
  const watch = watchFunctions(fns);
  const adm = admissionFunctions(fns);
  const serverRules: Rule[] = [
    ...relayRules(watch),
    ...admissionRules(adm),
    {
      apiGroups: ['coordination.k8s.io'],
      resources: ['leases'],
      verbs: ['get', 'create', 'update'],
      scope: 'namespace',
    },
  ];
  const docs: Doc[] = [
    ...roles('kruntimes:extension', 'kruntimes-extension', serverRules),
    ...[...watch, ...adm].flatMap(functionIdentity),
    ...cronFunctions(fns).flatMap((f) => cron(f)),
    ...webhooks(fns, WEBHOOK_CONFIGURATIONS[0] ?? 'kruntimes'),
  ];
  const header = '# Generated by scripts/gen-manifests.ts from functions/*/index.ts. Do not edit.\n';
  return header + docs.map((d) => stringify(d, { lineWidth: 0 })).join('---\n');
}

/**
 * The e2e suite's sample functions (e2e/fixtures/functions): the extra role of the extension
 * server hosting them, their CronJobs and webhooks, for the test-only kustomize overlay
 * e2e/fixtures/kustomize, which also points the server at the directory.
 */
export async function renderFixtures(): Promise<string> {
  const fns = await loadFunctions(join(REPO_ROOT, FIXTURE_FUNCTIONS));
  const watch = watchFunctions(fns);
  const adm = admissionFunctions(fns);
  const env = [{ name: EXTRA_DIRS_ENV, value: FIXTURE_FUNCTIONS }];
  const docs: Doc[] = [
    ...roles('kruntimes:extension:fixtures', 'kruntimes-extension', [
      ...relayRules(watch).filter((r) => r.scope !== 'namespace' || r.verbs[0] === 'impersonate'),
      ...admissionRules(adm),
    ]),
    ...[...watch, ...adm].flatMap(functionIdentity),
    ...cronFunctions(fns).flatMap((f) => cron(f, env)),
  ];
  const header = `# Generated by scripts/gen-manifests.ts from ${FIXTURE_FUNCTIONS}/*/index.ts (test fixtures). Do not edit.\n`;
  return header + docs.map((d) => stringify(d, { lineWidth: 0 })).join('---\n');
}

/**
 * The sample admission function's webhook, as a strategic-merge patch adding it to the product's
 * own configuration (merge key: webhook name), so the tls-certificates function, which may patch
 * only that configuration, injects its CA bundle too.
 */
export async function renderFixtureWebhooks(): Promise<string> {
  const fns = await loadFunctions(join(REPO_ROOT, FIXTURE_FUNCTIONS));
  const docs = webhooks(fns, WEBHOOK_CONFIGURATIONS[0] ?? 'kruntimes');
  const header = `# Generated by scripts/gen-manifests.ts from ${FIXTURE_FUNCTIONS}/*/index.ts (test fixtures). Do not edit.\n`;
  return header + docs.map((d) => stringify(d, { lineWidth: 0 })).join('---\n');
}

const FN_TLS_ITEMS = [
  { key: 'functions.crt', path: 'tls.crt' },
  { key: 'functions.key', path: 'tls.key' },
];

/** A watch function's own webhook Deployment (the generic function server serving it alone). */
function fnDeployment(fn: WatchFunction): Doc {
  const name = `${FUNCTION_SA_PREFIX}${fn.name}`;
  const labels = {
    'app.kubernetes.io/name': name,
    'kruntimes.io/function': fn.name,
    [FUNCTION_SERVICE_LABEL]: name,
    ...LABELS,
  };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: NS, labels },
    spec: {
      replicas: 2,
      selector: { matchLabels: { 'app.kubernetes.io/name': name } },
      template: {
        metadata: { labels },
        spec: {
          serviceAccountName: name,
          automountServiceAccountToken: false,
          terminationGracePeriodSeconds: 30,
          securityContext: { runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } },
          containers: [
            {
              name: 'fn',
              image: IMAGE,
              args: ['fn', 'serve', fn.name],
              ports: [
                { name: 'https', containerPort: 8443 },
                { name: 'health', containerPort: 8080 },
              ],
              env: [{ name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } }],
              readinessProbe: { httpGet: { path: '/readyz', port: 'health' }, periodSeconds: 2 },
              livenessProbe: { httpGet: { path: '/healthz', port: 'health' }, periodSeconds: 10 },
              resources: { requests: { cpu: '50m', memory: '96Mi' }, limits: { memory: '256Mi' } },
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                capabilities: { drop: ['ALL'] },
              },
              volumeMounts: [{ name: 'tls', mountPath: '/etc/kruntimes/tls', readOnly: true }],
            },
          ],
          volumes: [{ name: 'tls', secret: { secretName: 'kruntimes-extension-tls', items: FN_TLS_ITEMS } }],
        },
      },
    },
  };
}

/** Service, PodDisruptionBudget and NetworkPolicy (only the relay may call it) of a function's webhook. */
function fnNetwork(fn: WatchFunction): Doc[] {
  const name = `${FUNCTION_SA_PREFIX}${fn.name}`;
  const meta = { name, namespace: NS, labels: { 'kruntimes.io/function': fn.name, ...LABELS } };
  const selector = { 'app.kubernetes.io/name': name };
  return [
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: meta,
      spec: { selector, ports: [{ name: 'https', port: 443, targetPort: 'https' }] },
    },
    {
      apiVersion: 'policy/v1',
      kind: 'PodDisruptionBudget',
      metadata: meta,
      spec: { minAvailable: 1, selector: { matchLabels: selector } },
    },
    {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: meta,
      spec: {
        podSelector: { matchLabels: selector },
        policyTypes: ['Ingress'],
        ingress: [
          {
            from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'kruntimes-extension' } } }],
            ports: [{ protocol: 'TCP', port: 'https' }],
          },
        ],
      },
    },
  ];
}

/** The `webhook-functions` component: every watch function as its own webhook Deployment. */
export async function renderWebhookFunctions(): Promise<string> {
  const watch = watchFunctions(await loadFunctions(FUNCTIONS_DIR));
  const docs = watch.flatMap((f) => [fnDeployment(f), ...fnNetwork(f)]);
  const header = '# Generated by scripts/gen-manifests.ts from functions/*/index.ts. Do not edit.\n';
  return header + docs.map((d) => stringify(d, { lineWidth: 0 })).join('---\n');
}

const OUTPUTS: [string, () => Promise<string>][] = [
  [join('kustomize', 'components', 'webhook-functions', 'generated.yaml'), renderWebhookFunctions],
  [join('kustomize', 'base', 'generated', 'functions.yaml'), render],
  [join('e2e', 'fixtures', 'kustomize', 'generated.yaml'), renderFixtures],
  [join('e2e', 'fixtures', 'kustomize', 'webhooks-patch.yaml'), renderFixtureWebhooks],
];

async function main(): Promise<void> {
  let stale = false;
  for (const [rel, make] of OUTPUTS) {
    const out = join(REPO_ROOT, rel);
    const text = await make();
    if (!process.argv.includes('--check')) {
      writeFileSync(out, text);
      process.stdout.write(`wrote ${out}\n`);
    } else if (!existsSync(out) || readFileSync(out, 'utf8') !== text) {
      process.stderr.write(`${out} is stale: run npx tsx scripts/gen-manifests.ts\n`);
      stale = true;
    }
  }
  if (stale) process.exit(1);
  if (process.argv.includes('--check')) process.stdout.write('generated manifests are up to date\n');
}

if (process.argv[1]?.endsWith('gen-manifests.ts'))
  main().catch((err: unknown) => {
    process.stderr.write(`${String(err)}\n`);
    process.exit(1);
  });
