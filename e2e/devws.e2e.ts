/**
 * Developer workspaces (ADR 0020, docs/workspaces-dev.md) on the real cluster, one namespace:
 * admission refusals (invalid_repository_url, default_branch_required, operation_in_progress),
 * then create Project -> main Workspace ready with create_project succeeded (sandbox Pod named by
 * its effect ID, data PVC), stop (idle proof for the new admission epoch, sandbox terminated,
 * data kept), start (new generation, no clone). The Node agent and Git Server are not built: the
 * spec writes the Project's snapshot, the clone report and the idle report as they would.
 */
import assert from 'node:assert/strict';
import { isApiError } from '../lib/kube/errors.ts';
import type { Operation, Project, Workspace } from '../lib/devws/api.ts';
import { admin, deleteNamespace, eventually, newNamespace, serviceAccountClient } from './helpers.ts';

const G = '/apis/dev.kruntimes.io/v1alpha1';
const COMMIT = '0123456789abcdef0123456789abcdef01234567';

async function refusal(path: string, body: unknown): Promise<string> {
  try {
    await admin().create(path, body);
  } catch (err) {
    if (isApiError(err)) return `${err.code} ${err.message}`;
    throw err;
  }
  return 'created';
}

describe('developer workspaces (dev.kruntimes.io)', function () {
  let ns: string;
  const p = (n: string): string => `${G}/namespaces/${ns}/${n}`;
  const op = (name: string): Promise<Operation> => admin().get<Operation>(p(`operations/${name}`));
  const ws = (): Promise<Workspace> => admin().get<Workspace>(p('workspaces/p1-main'));
  const annotate = (path: string, key: string, value: unknown): Promise<unknown> =>
    admin().patch(path, { metadata: { annotations: { [`dev.kruntimes.io/${key}`]: JSON.stringify(value) } } });
  const project = (url: string, defaultBranch: string): Project => ({
    apiVersion: 'dev.kruntimes.io/v1alpha1',
    kind: 'Project',
    metadata: { name: 'p1' },
    spec: { repository: { url, defaultBranch } },
  });
  const lifecycle = (name: string, kind: Operation['spec']['kind']): Operation => ({
    apiVersion: 'dev.kruntimes.io/v1alpha1',
    kind: 'Operation',
    metadata: { name },
    spec: { project: 'p1', workspace: 'p1-main', kind },
  });
  before(async () => {
    ns = await newNamespace('devws');
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it('refuses invalid_repository_url and default_branch_required at admission', async () => {
    assert.match(
      await refusal(p('projects'), project('http://git.example/o/r.git', 'main')),
      /^400 .*invalid_repository_url/,
    );
    assert.match(
      await refusal(p('projects'), project('https://git.example/o/r.git', 'HEAD')),
      /^400 .*default_branch_required/,
    );
  });

  it('create_project: the main Workspace becomes ready and the operation succeeds; operation_in_progress meanwhile', async () => {
    await admin().create(p('projects'), project('https://git.example/o/r.git', 'main'));
    await admin().patch(p('projects/p1/status'), {
      status: { snapshot: { ref: `refs/ora/upstreams/b/snapshots/${COMMIT}`, commit: COMMIT } },
    });
    const frozen = await eventually('the clone input frozen', async () => (await op('p1-create')).status?.cloneInput);
    assert.equal(frozen.baseCommit, COMMIT);
    assert.equal(frozen.workspaceBranch, 'refs/heads/workspaces/p1-main/main');
    assert.match(await refusal(p('operations'), lifecycle('stop0', 'stop')), /^409 .*operation_in_progress/);
    await annotate(p('operations/p1-create'), 'clone-report', { attempt: 0, result: 'succeeded', commit: COMMIT });
    await eventually('create_project succeeded', async () => (await op('p1-create')).status?.state === 'succeeded');
    const w = await ws();
    assert.equal(w.status?.observedState, 'ready');
    assert.equal(w.status?.admissionOpen, true);
    assert.equal(w.status?.baseCommitId, COMMIT);
    const pods = await admin().list(`/api/v1/namespaces/${ns}/pods`);
    assert.deepEqual(
      pods.items.map((x) => x.metadata.name),
      [w.status?.sandbox?.id],
      'exactly one sandbox, named by its effect ID',
    );
    await eventually(
      'Project active',
      async () => (await admin().get<Project>(p('projects/p1'))).status?.lifecycle === 'active',
    );
  });

  it('admin_required: an editor may not delete the Project (delete_project needs the admin role)', async () => {
    await admin().create(`/api/v1/namespaces/${ns}/serviceaccounts`, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'dev' },
    });
    await admin().create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'dev-edit' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
      subjects: [{ kind: 'ServiceAccount', name: 'dev', namespace: ns }],
    });
    const dev = await serviceAccountClient(ns, 'dev');
    const body = { ...lifecycle('del1', 'delete_project'), spec: { project: 'p1', kind: 'delete_project' as const } };
    const denied = await eventually('the editor refused', async () => {
      try {
        await dev.create(p('operations'), body);
        return 'created';
      } catch (err) {
        // 403 from RBAC aggregation lag first (no create yet), then admission's admin_required.
        return isApiError(err, 403) && /admin_required/.test(err.message) ? err.message : undefined;
      }
    });
    assert.match(denied, /admin_required/);
  });

  it('stop proves idleness for the new admission epoch, terminates the sandbox and keeps the data; start does not re-clone', async () => {
    const before = (await ws()).status?.admissionEpoch ?? 0;
    await admin().create(p('operations'), lifecycle('stop1', 'stop'));
    const closed = await eventually('admission closed', async () => {
      const s = (await ws()).status;
      return s?.admissionOpen === false && s.admissionEpoch === before + 1 ? s : undefined;
    });
    await annotate(p('workspaces/p1-main'), 'idle-report', {
      epoch: closed.admissionEpoch,
      idle: true,
      generation: closed.runtimeGeneration,
    });
    await eventually('stop succeeded', async () => (await op('stop1')).status?.state === 'succeeded');
    assert.equal((await ws()).status?.observedState, 'stopped');
    const pods = await admin().list(`/api/v1/namespaces/${ns}/pods`);
    assert.equal(pods.items.length, 0, 'the sandbox is terminated');
    await admin().get(`/api/v1/namespaces/${ns}/persistentvolumeclaims/devws-p1-main-data`);
    await admin().create(p('operations'), lifecycle('start1', 'start'));
    await eventually('start succeeded', async () => (await op('start1')).status?.state === 'succeeded');
    const w = await ws();
    assert.equal(w.status?.observedState, 'ready');
    assert.equal(w.status?.runtimeGeneration, 2);
    assert.deepEqual((await op('start1')).status?.steps, ['sandbox', 'node', 'done']);
  });
});
