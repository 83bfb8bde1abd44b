/**
 * The kustomize layout renders with the pinned kubectl: production has the three aggregated
 * APIServices, and the without-run-extension-api component (seed 004 runExtensionAPI.enabled:
 * false) removes exactly those and nothing else.
 */
import assert from 'node:assert/strict';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { REPO_ROOT } from '../localenv/paths.ts';
import { kubectl } from './helpers.ts';

type Doc = { kind: string; metadata: { name: string; namespace?: string } };
const ids = (yaml: string): string[] =>
  parseAllDocuments(yaml)
    .map((d) => d.toJSON() as Doc)
    .filter(Boolean)
    .map((d) => `${d.kind}/${d.metadata.namespace ?? ''}/${d.metadata.name}`)
    .sort();

describe('kustomize overlays and components', function () {
  it('production ships no sample function; the e2e fixture overlay adds exactly them to local', async () => {
    const render = async (dir: string): Promise<string> => kubectl(['kustomize', join(REPO_ROOT, dir)]);
    const production = await render('kustomize/overlays/production');
    assert.doesNotMatch(production, /sample-(echo|policy|sweep)|kruntimes\.io\/sample/);
    const local = ids(await render('kustomize/overlays/local'));
    assert.ok(!local.some((i) => /sample/.test(i)));
    const fixtures = ids(await render('e2e/fixtures/kustomize'));
    assert.deepEqual(
      fixtures.filter((i) => !local.includes(i)),
      [
        'ClusterRole//kruntimes:extension:fixtures',
        'ClusterRole//kruntimes:fn:sample-echo',
        'ClusterRole//kruntimes:fn:sample-sweep',
        'ClusterRoleBinding//kruntimes:extension:fixtures',
        'ClusterRoleBinding//kruntimes:fn:sample-echo',
        'ClusterRoleBinding//kruntimes:fn:sample-sweep',
        'CronJob/kruntimes-system/kruntimes-fn-sample-sweep',
        // The relay may impersonate the sample watch function's own ServiceAccount.
        'Role/kruntimes-system/kruntimes:extension:fixtures',
        'RoleBinding/kruntimes-system/kruntimes:extension:fixtures',
        'ServiceAccount/kruntimes-system/kruntimes-fn-sample-echo',
        // The sample admission function's own identity (it declares no rules, so no role).
        'ServiceAccount/kruntimes-system/kruntimes-fn-sample-policy',
        'ServiceAccount/kruntimes-system/kruntimes-fn-sample-sweep',
      ],
    );
    // The sample admission webhook joins the product's own configuration (the only one the
    // tls-certificates function may inject a CA bundle into).
    const hooks = (await render('e2e/fixtures/kustomize'))
      .split('\n---\n')
      .find((d) => d.includes('kind: ValidatingWebhookConfiguration'));
    assert.match(hooks ?? '', /name: sample-policy\.kruntimes\.io/);
    assert.match(hooks ?? '', /name: run-workspace-use\.kruntimes\.io/);
  });

  it('without-run-extension-api drops the aggregated APIServices and keeps everything else', async () => {
    const production = ids(await kubectl(['kustomize', join(REPO_ROOT, 'kustomize', 'overlays', 'production')]));
    for (const kind of ['Deployment', 'Service', 'PodDisruptionBudget', 'NetworkPolicy'])
      assert.ok(
        production.includes(`${kind}/kruntimes-system/kruntimes-fn-run-scheduler`),
        `production: ${kind} of a function`,
      );
    const apiServices = production.filter((i) => i.startsWith('APIService/'));
    assert.deepEqual(apiServices, [
      'APIService//v1alpha1.artifacts.kruntimes.io',
      'APIService//v1alpha1.logs.kruntimes.io',
      'APIService//v1alpha1.sessions.kruntimes.io',
    ]);
    const dir = join(REPO_ROOT, '.kruntimes', `kustomize-test-${process.pid}`);
    mkdirSync(dir, { recursive: true });
    try {
      writeFileSync(
        join(dir, 'kustomization.yaml'),
        'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../../kustomize/overlays/production]\ncomponents: [../../kustomize/components/without-run-extension-api]\n',
      );
      const without = ids(await kubectl(['kustomize', dir]));
      assert.deepEqual(
        without,
        production.filter((i) => !i.startsWith('APIService/')),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the dashboard component adds an HTTPS server with no token, no role and the Secure-cookie configuration', async () => {
    const production = ids(await kubectl(['kustomize', join(REPO_ROOT, 'kustomize', 'overlays', 'production')]));
    const dir = join(REPO_ROOT, '.kruntimes', `kustomize-dash-${process.pid}`);
    mkdirSync(dir, { recursive: true });
    try {
      writeFileSync(
        join(dir, 'kustomization.yaml'),
        'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../../kustomize/overlays/production]\ncomponents: [../../kustomize/components/dashboard]\n',
      );
      const yaml = await kubectl(['kustomize', dir]);
      const all = ids(yaml);
      assert.deepEqual(
        all.filter((i) => !production.includes(i)),
        [
          'Deployment/kruntimes-system/kruntimes-dashboard',
          'NetworkPolicy/kruntimes-system/kruntimes-dashboard',
          'Service/kruntimes-system/kruntimes-dashboard',
          'ServiceAccount/kruntimes-system/kruntimes-dashboard',
        ],
      );
      type Probe = { httpGet: { port: string; scheme?: string } };
      type Container = {
        args: string[];
        env: { name: string; value: string }[];
        securityContext: { capabilities: { drop: string[] } };
        readinessProbe: Probe;
        livenessProbe: Probe;
      };
      type Volume = { name: string; secret?: { secretName: string; items?: { key: string; path: string }[] } };
      type PodSpec = { automountServiceAccountToken?: boolean; containers: Container[]; volumes: Volume[] };
      type Obj = Doc & {
        subjects?: unknown[];
        automountServiceAccountToken?: boolean;
        spec?: { template: { spec: PodSpec }; ports?: { name: string; port: number; targetPort: string }[] };
      };
      const docs = parseAllDocuments(yaml).map((d) => d.toJSON() as Obj);
      // Least privilege: nothing binds the dashboard's ServiceAccount to any role.
      const bindings = docs.filter((d) => /RoleBinding$/.test(d.kind));
      assert.ok(!bindings.some((b) => JSON.stringify(b.subjects ?? []).includes('kruntimes-dashboard')));
      const sa = docs.find((d) => d.kind === 'ServiceAccount' && d.metadata.name === 'kruntimes-dashboard');
      assert.equal(sa?.automountServiceAccountToken, false);
      const dep = docs.find((d) => d.kind === 'Deployment' && d.metadata.name === 'kruntimes-dashboard');
      const pod = dep?.spec?.template.spec;
      assert.equal(pod?.automountServiceAccountToken, false);
      const c = pod?.containers[0];
      assert.deepEqual(c?.args, ['dashboard']);
      const env = Object.fromEntries((c?.env ?? []).map((e) => [e.name, e.value]));
      assert.match(env.KRT_DASHBOARD_URL ?? '', /^https:\/\//);
      assert.equal(env.KRT_DASHBOARD_AUTH, 'token');
      assert.deepEqual(c?.securityContext.capabilities.drop, ['ALL']);
      // HTTPS in the Pod: the dashboard's own pair of the TLS Secret (not the CA key), probes over HTTPS.
      const secrets = (pod?.volumes ?? []).filter((v) => v.secret);
      assert.deepEqual(
        secrets.map((v) => [v.secret?.secretName, v.secret?.items?.map((i) => `${i.key}->${i.path}`)]),
        [['kruntimes-extension-tls', ['dashboard.crt->tls.crt', 'dashboard.key->tls.key']]],
      );
      assert.deepEqual([c?.readinessProbe.httpGet.scheme, c?.livenessProbe.httpGet.scheme], ['HTTPS', 'HTTPS']);
      const svc = docs.find((d) => d.kind === 'Service' && d.metadata.name === 'kruntimes-dashboard');
      assert.deepEqual(svc?.spec?.ports, [{ name: 'https', port: 443, targetPort: 'https' }]);
      // The API server accepts every object as written (schema, names, references).
      const added = parseAllDocuments(yaml)
        .filter((d) => /kruntimes-dashboard/.test(String((d.toJSON() as Doc).metadata.name)))
        .map((d) => d.toString())
        .join('---\n');
      await kubectl(['apply', '--dry-run=server', '-f', '-'], added);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the devws Git Server component: its review-only ClusterRole, a NetworkPolicy for sandboxes and devws-sync, and a test overlay that allow-lists the sync target explicitly', async () => {
    const production = ids(await kubectl(['kustomize', join(REPO_ROOT, 'kustomize', 'overlays', 'production')]));
    const dir = join(REPO_ROOT, '.kruntimes', `kustomize-git-${process.pid}`);
    mkdirSync(dir, { recursive: true });
    try {
      // The e2e's repositories live on the host: a test installation says so, explicitly.
      const allow = `[{"op": "replace", "path": "/spec/template/spec/containers/0/env/5/value", "value": "127.0.0.1/32"}]`;
      writeFileSync(
        join(dir, 'kustomization.yaml'),
        `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../../kustomize/overlays/production]\ncomponents: [../../kustomize/components/devws-git-server]\npatches:\n  - target: {kind: Deployment, name: kruntimes-devws-git}\n    patch: '${allow}'\n`,
      );
      const yaml = await kubectl(['kustomize', dir]);
      assert.deepEqual(
        ids(yaml).filter((i) => !production.includes(i)),
        [
          'ClusterRole//kruntimes:devws-git',
          'ClusterRoleBinding//kruntimes:devws-git',
          'Deployment/kruntimes-system/kruntimes-devws-git',
          'NetworkPolicy/kruntimes-system/kruntimes-devws-git',
          'PersistentVolumeClaim/kruntimes-system/kruntimes-devws-git',
          'Service/kruntimes-system/kruntimes-devws-git',
          'ServiceAccount/kruntimes-system/kruntimes-devws-git',
        ],
      );
      type Peer = { namespaceSelector?: object; podSelector?: { matchLabels?: object; matchExpressions?: object[] } };
      type Obj = Doc & {
        rules?: { resources: string[]; verbs: string[] }[];
        spec?: {
          ingress?: { from: Peer[] }[];
          policyTypes?: string[];
          template?: { spec: { containers: { env: { name: string; value: string }[] }[] } };
        };
      };
      const docs = parseAllDocuments(yaml).map((d) => d.toJSON() as Obj);
      const role = docs.find((d) => d.kind === 'ClusterRole' && d.metadata.name === 'kruntimes:devws-git');
      assert.deepEqual(
        role?.rules?.map((r) => `${r.resources.join(',')}:${r.verbs.join(',')}`),
        ['tokenreviews:create', 'subjectaccessreviews:create', 'projects:get', 'workspaces:list'],
        'reviews and reads only',
      );
      const np = docs.find((d) => d.kind === 'NetworkPolicy' && d.metadata.name === 'kruntimes-devws-git');
      assert.deepEqual(np?.spec?.policyTypes, ['Ingress']);
      assert.deepEqual(np?.spec?.ingress?.[0]?.from, [
        {
          namespaceSelector: {},
          podSelector: { matchExpressions: [{ key: 'dev.kruntimes.io/workspace', operator: 'Exists' }] },
        },
        { podSelector: { matchLabels: { 'app.kubernetes.io/name': 'kruntimes-extension' } } },
        { podSelector: { matchLabels: { 'app.kubernetes.io/name': 'kruntimes-fn-devws-sync' } } },
      ]);
      const dep = docs.find((d) => d.kind === 'Deployment' && d.metadata.name === 'kruntimes-devws-git');
      const env = Object.fromEntries(
        (dep?.spec?.template?.spec.containers[0]?.env ?? []).map((e) => [e.name, e.value]),
      );
      assert.deepEqual([env.KRT_GIT_SYNC_ALLOW, env.KRT_GIT_SYNC_DENY], ['127.0.0.1/32', '']);
      // The API server accepts every object as written (schema, names, references).
      const added = parseAllDocuments(yaml)
        .filter((d) => /devws-git/.test(String((d.toJSON() as Doc).metadata.name)))
        .map((d) => d.toString())
        .join('---\n');
      await kubectl(['apply', '--dry-run=server', '-f', '-'], added);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
