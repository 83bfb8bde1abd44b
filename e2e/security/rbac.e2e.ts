/**
 * Security attack specs (issue 11) for RBAC and admission: each `it` performs an attack as a weak
 * user (a namespace viewer or editor, a function's ServiceAccount) and asserts it fails.
 * Each failed on the code before its fix (noted per spec).
 */
import assert from 'node:assert/strict';
import type { KubeClient } from '../../lib/kube/client.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { isApiError } from '../../lib/kube/errors.ts';
import { admin, deleteNamespace, eventually, newNamespace, serviceAccountClient } from '../helpers.ts';
import { apply, kubernetesClass, uniq, X, API_VERSION } from '../jobclass-fixtures.ts';

const KRT_NS = 'kruntimes-system';

interface Attrs {
  verb: string;
  group: string;
  resource: string;
  subresource?: string;
  namespace?: string;
  name?: string;
}

async function allowed(user: string, groups: string[], a: Attrs): Promise<boolean> {
  const res = await admin().create<KubeObject & { status?: { allowed?: boolean } }>(
    '/apis/authorization.k8s.io/v1/subjectaccessreviews',
    {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: { user, groups, resourceAttributes: a },
    },
  );
  return res.status?.allowed === true;
}

const saUser = (ns: string, sa: string): { user: string; groups: string[] } => ({
  user: `system:serviceaccount:${ns}:${sa}`,
  groups: ['system:serviceaccounts', `system:serviceaccounts:${ns}`, 'system:authenticated'],
});

async function bindClusterRole(ns: string, name: string, role: string, sa: string): Promise<void> {
  await admin().create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
    subjects: [{ kind: 'ServiceAccount', name: sa, namespace: ns }],
  });
}

async function role(ns: string, name: string, rules: Record<string, unknown>[], sa: string): Promise<void> {
  await admin().create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name },
    rules,
  });
  await admin().create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
    subjects: [{ kind: 'ServiceAccount', name: sa, namespace: ns }],
  });
}

async function serviceAccount(ns: string, name: string): Promise<void> {
  await admin().create(`/api/v1/namespaces/${ns}/serviceaccounts`, {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: { name },
  });
}

/** One row of the user-role table: what a namespace viewer and editor may do. */
interface Row {
  group: string;
  resource: string;
  subresource?: string;
  verbs: string[];
  view: boolean;
  edit: boolean;
  /** Cluster-scoped: asked without a namespace (a RoleBinding never grants it). */
  cluster?: boolean;
}

const K = 'kruntimes.io';
const E = 'execution.ayatori.ddupan.top';
const READ = ['get', 'list', 'watch'];
const WRITE = ['create', 'update', 'patch', 'delete', 'deletecollection'];
const KINDS = ['actions', 'persistentworkspaces', 'runs', 'runtimes', 'workflowruns', 'workflows'];

const TABLE: Row[] = [
  ...KINDS.flatMap((resource): Row[] => [
    { group: K, resource, verbs: READ, view: true, edit: true },
    { group: K, resource, verbs: WRITE, view: false, edit: true },
    { group: K, resource, subresource: 'status', verbs: ['get'], view: true, edit: true },
    { group: K, resource, subresource: 'status', verbs: ['update', 'patch'], view: false, edit: false },
  ]),
  { group: K, resource: 'runtimes', subresource: 'scale', verbs: ['get'], view: true, edit: true },
  { group: K, resource: 'runtimes', subresource: 'scale', verbs: ['update', 'patch'], view: false, edit: true },
  { group: K, resource: 'persistentworkspaces', subresource: 'use', verbs: ['use'], view: false, edit: true },
  { group: E, resource: 'jobs', verbs: READ, view: true, edit: true },
  { group: E, resource: 'jobs', verbs: WRITE, view: false, edit: true },
  { group: E, resource: 'jobs', subresource: 'status', verbs: ['get'], view: true, edit: true },
  { group: E, resource: 'jobs', subresource: 'status', verbs: ['update', 'patch'], view: false, edit: false },
  { group: 'logs.kruntimes.io', resource: 'runs', subresource: 'log', verbs: ['get'], view: true, edit: true },
  {
    group: 'artifacts.kruntimes.io',
    resource: 'runs',
    subresource: 'artifacts',
    verbs: ['get'],
    view: true,
    edit: true,
  },
  {
    group: 'sessions.kruntimes.io',
    resource: 'runs',
    subresource: 'session',
    verbs: ['get', 'create'],
    view: false,
    edit: true,
  },
  // Cluster-scoped kinds are never granted through a namespace RoleBinding.
  ...['jobclasses', 'kubernetesexecutionparameters', 'opensandboxexecutionparameters'].map((resource): Row => ({
    group: E,
    resource,
    verbs: [...READ, ...WRITE],
    view: false,
    edit: false,
    cluster: true,
  })),
];

describe('security: RBAC and admission attacks (issue 11)', function () {
  this.timeout(180_000);
  let ns: string;
  const clients: KubeClient[] = [];
  before(async () => {
    ns = await newNamespace('sec-rbac');
    for (const [sa, role] of [
      ['viewer', 'view'],
      ['editor', 'edit'],
    ] as const) {
      await serviceAccount(ns, sa);
      await bindClusterRole(ns, sa, role, sa);
    }
  });
  after(async () => {
    for (const c of clients) c.close();
    await deleteNamespace(ns);
  });

  // Old code: view and edit held no kruntimes.io or execution.ayatori.ddupan.top rule at all
  // (the viewer could not get a Run; the editor could not create one).
  it('user roles: a namespace viewer and editor (built-in view/edit) hold exactly the documented verbs', async () => {
    const mismatches: string[] = [];
    await eventually(
      'the aggregated view/edit roles',
      async () =>
        allowed(saUser(ns, 'editor').user, saUser(ns, 'editor').groups, {
          verb: 'create',
          group: K,
          resource: 'runs',
          namespace: ns,
        }),
      30_000,
    );
    for (const row of TABLE) {
      for (const verb of row.verbs) {
        for (const who of ['viewer', 'editor'] as const) {
          const want = who === 'viewer' ? row.view : row.edit;
          const { user, groups } = saUser(ns, who);
          const attrs: Attrs = { verb, group: row.group, resource: row.resource, namespace: ns, name: 'x' };
          if (row.subresource) attrs.subresource = row.subresource;
          if (row.cluster) delete attrs.namespace;
          if (verb === 'list' || verb === 'watch' || verb === 'create' || verb === 'deletecollection')
            delete attrs.name;
          const got = await allowed(user, groups, attrs);
          if (got !== want)
            mismatches.push(
              `${who} ${verb} ${row.group}/${row.resource}${row.subresource ? `/${row.subresource}` : ''}: got ${got}, want ${want}`,
            );
        }
      }
    }
    assert.deepEqual(mismatches, []);
    // Neither gets Secrets through kruntimes' roles beyond what Kubernetes' view/edit already say.
    assert.equal(
      await allowed(saUser(ns, 'viewer').user, saUser(ns, 'viewer').groups, {
        verb: 'get',
        group: '',
        resource: 'secrets',
        namespace: ns,
      }),
      false,
    );
  });

  // Old code: the tls-certificates ServiceAccount could patch every APIService and webhook
  // configuration in the cluster (and list every Secret of kruntimes-system).
  it('item 9: the tls-certificates identity may patch only kruntimes APIServices and webhook configuration', async () => {
    const { user, groups } = saUser(KRT_NS, 'kruntimes-fn-tls-certificates');
    const can = (verb: string, group: string, resource: string, name?: string, namespace?: string): Promise<boolean> =>
      allowed(user, groups, { verb, group, resource, ...(name ? { name } : {}), ...(namespace ? { namespace } : {}) });
    for (const name of [
      'v1alpha1.logs.kruntimes.io',
      'v1alpha1.sessions.kruntimes.io',
      'v1alpha1.artifacts.kruntimes.io',
    ])
      assert.equal(await can('patch', 'apiregistration.k8s.io', 'apiservices', name), true, name);
    assert.equal(
      await can('patch', 'admissionregistration.k8s.io', 'validatingwebhookconfigurations', 'kruntimes'),
      true,
    );
    assert.equal(await can('patch', 'apiregistration.k8s.io', 'apiservices', 'v1beta1.metrics.k8s.io'), false);
    assert.equal(await can('patch', 'apiregistration.k8s.io', 'apiservices'), false, 'no unnamed patch');
    assert.equal(await can('patch', 'admissionregistration.k8s.io', 'validatingwebhookconfigurations', 'other'), false);
    assert.equal(await can('patch', 'admissionregistration.k8s.io', 'mutatingwebhookconfigurations', 'other'), false);
    assert.equal(await can('list', '', 'secrets', undefined, KRT_NS), false, 'no Secret listing');
    assert.equal(await can('get', '', 'secrets', 'other', KRT_NS), false);
    assert.equal(await can('patch', '', 'secrets', 'kruntimes-extension-tls', KRT_NS), true);
    // And the real token cannot do it either.
    const tls = await serviceAccountClient(KRT_NS, 'kruntimes-fn-tls-certificates');
    clients.push(tls);
    await assert.rejects(
      tls.patch('/apis/apiregistration.k8s.io/v1/apiservices/v1.apps', { metadata: { labels: { x: 'y' } } }),
      (e: unknown) => isApiError(e, 403),
    );
  });

  // Old code: a user allowed only to create Jobs got any Secret of the namespace into a Job's
  // environment (and, with the OpenSandbox adapter, sent to the sandbox) by naming it.
  it('item 5: a Job may not name a Secret its creator may not read', async () => {
    const cls = `e2e-sec-${uniq}`;
    await apply(`${X}/kubernetesexecutionparameters`, {
      apiVersion: API_VERSION,
      kind: 'KubernetesExecutionParameters',
      metadata: { name: `${cls}-params` },
      spec: { serviceAccountName: 'jobs-runner' },
    });
    await apply(`${X}/jobclasses`, kubernetesClass(cls, `${cls}-params`));
    await admin().create(`/api/v1/namespaces/${ns}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'db' },
      stringData: { password: 'hunter2' },
    });
    await serviceAccount(ns, 'submitter');
    await role(ns, 'submit-jobs', [{ apiGroups: [E], resources: ['jobs'], verbs: ['create', 'get'] }], 'submitter');
    const submitter = await serviceAccountClient(ns, 'submitter');
    clients.push(submitter);
    const create = (name: string, spec: Record<string, unknown>): Promise<unknown> =>
      submitter.create(`${X}/namespaces/${ns}/jobs`, {
        apiVersion: API_VERSION,
        kind: 'Job',
        metadata: { name },
        spec: { jobClassName: cls, image: 'bash', command: ['bash', '-c', 'echo "$P"'], ...spec },
      });
    const secretEnv = { env: [{ name: 'P', valueFrom: { secretKeyRef: { name: 'db', key: 'password' } } }] };
    await eventually('the submitter Role', async () => {
      await create('plain', {});
      return true;
    });
    await assert.rejects(
      create('steal-env', secretEnv),
      (e: unknown) =>
        isApiError(e, 403) &&
        /spec\.env\[0\]\.valueFrom\.secretKeyRef\.name: system:serviceaccount:.*:submitter may not get Secret "db"/.test(
          e.message,
        ),
    );
    await assert.rejects(
      create('steal-pull', { imagePullSecret: { name: 'db' } }),
      (e: unknown) => isApiError(e, 403) && /spec\.imagePullSecret\.name: .* may not get Secret "db"/.test(e.message),
    );
    // Granting get on that one Secret (resourceNames) is what lets the Job name it.
    await role(
      ns,
      'read-db',
      [{ apiGroups: [''], resources: ['secrets'], resourceNames: ['db'], verbs: ['get'] }],
      'submitter',
    );
    await eventually('the read-db grant', async () => {
      await create('allowed', secretEnv);
      return true;
    });
  });
});
