import assert from 'node:assert/strict';
import type { AdmissionContext, AdmissionRequest } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { CONTROLLER_SERVICE_ACCOUNT, JOB_LABEL, WORKFLOWRUN_UID_LABEL } from '../../lib/workflow/labels.ts';
import { admitRunWorkspace } from './index.ts';

const UID = 'wfr-uid';
const owner = (uid = UID, name = 'wfr'): NonNullable<KubeObject['metadata']['ownerReferences']> => [
  { apiVersion: 'kruntimes.io/v1alpha1', kind: 'WorkflowRun', name, uid, controller: true },
];
const labels = (uid = UID, job = 'build'): Record<string, string> => ({
  [WORKFLOWRUN_UID_LABEL]: uid,
  [JOB_LABEL]: job,
});

function workspace(
  over: Partial<KubeObject['metadata']> = {},
  status: { phase?: string } = { phase: 'Bound' },
): KubeObject {
  return {
    metadata: { name: 'w', namespace: 'ns', ownerReferences: owner(), labels: labels(), ...over },
    spec: { runtime: 'bash' },
    status,
  };
}
function runObj(over: Partial<KubeObject['metadata']> = {}, runtime = 'bash'): KubeObject {
  return {
    metadata: { name: 'r', namespace: 'ns', ownerReferences: owner(), labels: labels(), ...over },
    spec: { runtime, workspace: { name: 'w' } },
  };
}
function request(run: KubeObject, username = CONTROLLER_SERVICE_ACCOUNT): AdmissionRequest {
  return {
    uid: 'req',
    kind: { group: 'kruntimes.io', version: 'v1alpha1', kind: 'Run' },
    resource: { group: 'kruntimes.io', version: 'v1alpha1', resource: 'runs' },
    namespace: 'ns',
    operation: 'CREATE',
    userInfo: { username, groups: ['g'] },
    object: run,
  };
}
interface World {
  ws?: KubeObject | undefined;
  wfr?: KubeObject | undefined;
  sar?: boolean | Error;
}
function ctx(world: World, reviews: unknown[] = []): AdmissionContext {
  return {
    now: new Date(),
    signal: new AbortController().signal,
    get: <T extends KubeObject>(path: string): Promise<T | undefined> =>
      Promise.resolve((path.includes('/persistentworkspaces/') ? world.ws : world.wfr) as T | undefined),
    post: <T>(_path: string, body: unknown): Promise<T> => {
      reviews.push(body);
      if (world.sar instanceof Error) return Promise.reject(world.sar);
      return Promise.resolve({ status: { allowed: world.sar === true } } as T);
    },
  };
}
const liveWfr = { metadata: { name: 'wfr', namespace: 'ns', uid: UID } };

async function denied(run: KubeObject, world: World, message: RegExp, user?: string, code = 403): Promise<void> {
  const res = await admitRunWorkspace(request(run, user), ctx(world));
  assert.equal(res.allowed, false, JSON.stringify(res));
  assert.equal(res.code, code, res.message);
  assert.match(res.message ?? '', message);
}

describe('run-workspace-use admission (seed 000 permission boundary)', () => {
  it('allows the Workflow controller for its own job workspace without a SubjectAccessReview', async () => {
    const reviews: unknown[] = [];
    const res = await admitRunWorkspace(request(runObj()), ctx({ ws: workspace(), wfr: liveWfr }, reviews));
    assert.deepEqual(res, { allowed: true });
    assert.deepEqual(reviews, [], 'no second review on the controller path');
  });

  it('denies the controller path for a stale WorkflowRun UID (gone, recreated, or being deleted)', async () => {
    const stale = /the owning WorkflowRun no longer exists \(stale UID\)/;
    await denied(runObj(), { ws: workspace(), wfr: undefined }, stale);
    await denied(runObj(), { ws: workspace(), wfr: { metadata: { name: 'wfr', uid: 'recreated' } } }, stale);
    await denied(
      runObj(),
      { ws: workspace(), wfr: { metadata: { name: 'wfr', uid: UID, deletionTimestamp: '2026-07-06T12:00:00Z' } } },
      stale,
    );
  });

  it('denies the controller path across jobs and across WorkflowRuns', async () => {
    await denied(
      runObj({ labels: labels(UID, 'deploy') }),
      { ws: workspace(), wfr: liveWfr },
      /the Run and the workspace belong to different jobs/,
    );
    await denied(
      runObj({ labels: { [WORKFLOWRUN_UID_LABEL]: UID } }),
      { ws: workspace(), wfr: liveWfr },
      /belong to different jobs/,
      undefined,
    );
    await denied(
      runObj(),
      { ws: workspace({ ownerReferences: owner('other-uid', 'other') }), wfr: liveWfr },
      /the Run and the workspace belong to different WorkflowRuns/,
    );
  });

  it('denies the controller path when the WorkflowRun-UID labels do not match the owner', async () => {
    const mismatch = /the kruntimes.io\/workflowrun-uid labels do not match the owning WorkflowRun UID/;
    await denied(runObj({ labels: labels('forged') }), { ws: workspace(), wfr: liveWfr }, mismatch);
    await denied(runObj(), { ws: workspace({ labels: labels('forged') }), wfr: liveWfr }, mismatch);
  });

  it('denies the controller path when the Run or the workspace is not owned by a WorkflowRun', async () => {
    const notOwned = /must both be controller-owned by a WorkflowRun/;
    await denied(runObj(), { ws: workspace({ ownerReferences: [] }), wfr: liveWfr }, notOwned);
    const directRun = runObj({ ownerReferences: [] });
    await denied(directRun, { ws: workspace(), wfr: liveWfr }, notOwned);
  });

  it('rejects a missing, Runtime-incompatible, deleting or Released workspace for everyone', async () => {
    await denied(runObj(), { ws: undefined }, /PersistentWorkspace "w" does not exist in namespace ns/, 'alice', 422);
    await denied(
      runObj({}, 'python'),
      { ws: workspace() },
      /belongs to runtime "bash", but the Run uses runtime "python"/,
      'alice',
      422,
    );
    await denied(
      runObj(),
      { ws: workspace({}, { phase: 'Released' }), wfr: liveWfr },
      /is being deleted \(Released\)/,
      undefined,
      422,
    );
    await denied(
      runObj(),
      { ws: workspace({ deletionTimestamp: '2026-07-06T12:00:00Z' }), wfr: liveWfr },
      /is being deleted/,
      'alice',
      422,
    );
  });

  it('other users need use on persistentworkspaces/use (SubjectAccessReview), fail closed on errors', async () => {
    const reviews: unknown[] = [];
    const copied = runObj(); // copying the controller's labels and owner references gives no shortcut
    const ok = await admitRunWorkspace(request(copied, 'alice'), ctx({ ws: workspace(), sar: true }, reviews));
    assert.deepEqual(ok, { allowed: true });
    const spec = (reviews[0] as { spec: { user: string; resourceAttributes: Record<string, string> } }).spec;
    assert.equal(spec.user, 'alice');
    assert.deepEqual(spec.resourceAttributes, {
      namespace: 'ns',
      verb: 'use',
      group: 'kruntimes.io',
      resource: 'persistentworkspaces',
      subresource: 'use',
      name: 'w',
    });
    await denied(
      copied,
      { ws: workspace(), sar: false },
      /alice may not use PersistentWorkspace "w" in namespace ns/,
      'alice',
    );
    await denied(
      copied,
      { ws: workspace(), sar: new Error('timeout') },
      /could not verify permission.*timeout/,
      'alice',
      503,
    );
  });

  it('ignores Runs without a workspace and updates', async () => {
    const plain: KubeObject = { metadata: { name: 'r', namespace: 'ns' }, spec: { runtime: 'bash' } };
    assert.deepEqual(await admitRunWorkspace(request(plain, 'alice'), ctx({})), { allowed: true });
    assert.deepEqual(await admitRunWorkspace({ ...request(runObj(), 'alice'), operation: 'UPDATE' }, ctx({})), {
      allowed: true,
    });
  });
});

describe('run-workspace-use reads the informer cache first', () => {
  /** A context whose live reads are counted; the cache holds what `cache` names ("<resource>/<name>"). */
  function cachedCtx(cache: Record<string, KubeObject>, live: World): { ctx: AdmissionContext; gets: string[] } {
    const gets: string[] = [];
    const base = ctx(live);
    return {
      gets,
      ctx: {
        ...base,
        get: <T extends KubeObject>(path: string): Promise<T | undefined> => {
          gets.push(path);
          return base.get<T>(path);
        },
        cached: (r, ns, name) => (ns === 'ns' ? cache[`${r.resource}/${name}`] : undefined),
      },
    };
  }

  it('the controller path is decided from the cached workspace and WorkflowRun, without a live read', async () => {
    const c = cachedCtx({ 'persistentworkspaces/w': workspace(), 'workflowruns/wfr': liveWfr }, {});
    assert.deepEqual(await admitRunWorkspace(request(runObj()), c.ctx), { allowed: true });
    assert.deepEqual(c.gets, []);
  });

  it('the cached copy decides a denial too (a workspace of another runtime)', async () => {
    const c = cachedCtx({ 'persistentworkspaces/w': workspace(), 'workflowruns/wfr': liveWfr }, {});
    const res = await admitRunWorkspace(request(runObj({}, 'python')), c.ctx);
    assert.equal(res.allowed, false);
    assert.match(res.message ?? '', /belongs to runtime "bash"/);
    assert.deepEqual(c.gets, []);
  });

  it('an object the cache does not hold (a workspace created just before) is read live', async () => {
    const c = cachedCtx({ 'workflowruns/wfr': liveWfr }, { ws: workspace() });
    assert.deepEqual(await admitRunWorkspace(request(runObj()), c.ctx), { allowed: true });
    assert.deepEqual(c.gets, ['/apis/kruntimes.io/v1alpha1/namespaces/ns/persistentworkspaces/w']);
  });
});
