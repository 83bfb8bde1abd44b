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
});
