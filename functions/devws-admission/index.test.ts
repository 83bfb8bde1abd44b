import assert from 'node:assert/strict';
import type { Operation, Project, Workspace } from '../../lib/devws/api.ts';
import type { AdmissionContext, AdmissionRequest } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { admit, recordRefusal } from './index.ts';
import { refusalEvent, refusalSubjects } from './refusal.ts';

const AV = 'dev.kruntimes.io/v1alpha1';
const NOW = new Date('2026-12-02T09:00:10Z');
const project: Project = {
  apiVersion: AV,
  kind: 'Project',
  metadata: { name: 'p1', namespace: 't', uid: 'u-p1' },
  spec: { repository: { url: 'https://h/o/r.git', defaultBranch: 'main' } },
  status: { lifecycle: 'active' },
};
const main: Workspace = {
  apiVersion: AV,
  kind: 'Workspace',
  metadata: { name: 'p1-main', namespace: 't', uid: 'u-ws' },
  spec: { project: 'p1', kind: 'main', desiredState: 'running' },
  status: { observedState: 'ready', baseCommitId: 'a'.repeat(40) },
};
const running: Operation = {
  apiVersion: AV,
  kind: 'Operation',
  metadata: { name: 'p1-create', namespace: 't', uid: 'u-op' },
  spec: { project: 'p1', workspace: 'p1-main', kind: 'create_project' },
  status: { state: 'running' },
};
const stop = (workspace = 'p1-main'): Operation => ({
  apiVersion: AV,
  kind: 'Operation',
  metadata: { name: 'stop1', namespace: 't' },
  spec: { project: 'p1', workspace, kind: 'stop' },
});
const request = (o: Partial<AdmissionRequest> & Pick<AdmissionRequest, 'object'>): AdmissionRequest => ({
  uid: 'r1',
  kind: { group: 'dev.kruntimes.io', version: 'v1alpha1', kind: o.object?.kind ?? '' },
  resource: { group: 'dev.kruntimes.io', version: 'v1alpha1', resource: '' },
  namespace: 't',
  operation: 'CREATE',
  userInfo: { username: 'alice' },
  ...o,
});

/** The cluster as admission reads it (paths to objects), recording what the handler posts. */
interface Review {
  spec: { user: string; resourceAttributes: { resource: string; name: string } };
}
/** SubjectAccessReviews: alice may read the Secret repo-cred, nobody anything else. */
const reviews = (body: unknown): { status: { allowed: boolean } } => {
  const { user, resourceAttributes: a } = (body as Review).spec;
  return { status: { allowed: user === 'alice' && a.resource === 'secrets' && a.name === 'repo-cred' } };
};

function cluster(objects: KubeObject[]): { ctx: AdmissionContext; posted: Promise<[string, KubeObject]>[] } {
  const byPath = new Map(
    objects.map((o) => [`/apis/${AV}/namespaces/t/${(o.kind ?? '').toLowerCase()}s/${o.metadata.name ?? ''}`, o]),
  );
  const list = { items: objects.filter((o) => o.kind === 'Operation') };
  const posted: Promise<[string, KubeObject]>[] = [];
  let resolvePost: (v: [string, KubeObject]) => void = () => undefined;
  posted.push(new Promise((r) => (resolvePost = r)));
  const ctx: AdmissionContext = {
    now: NOW,
    signal: new AbortController().signal,
    get: <T extends KubeObject>(path: string) =>
      Promise.resolve((path.endsWith('/operations') ? list : byPath.get(path)) as T | undefined),
    post: <T>(path: string, body: unknown) => {
      if (path.endsWith('/subjectaccessreviews')) return Promise.resolve(reviews(body) as T);
      resolvePost([path, body as KubeObject]);
      return Promise.resolve(body as T);
    },
  };
  return { ctx, posted };
}

describe('devws-admission: every refusal is recorded as an Event', () => {
  it('a refused Operation (operation_in_progress) is recorded on its Workspace: Warning OperationRefused, what, for whom, the stable reason', async () => {
    const { ctx, posted } = cluster([project, main, running]);
    const req = request({ object: stop() });
    const r = await admit(req, ctx);
    assert.equal(r.allowed, false);
    const [path, event] = (await posted[0]) as [string, KubeObject & Record<string, unknown>];
    assert.equal(path, '/api/v1/namespaces/t/events');
    assert.deepEqual(event.involvedObject, {
      apiVersion: AV,
      kind: 'Workspace',
      name: 'p1-main',
      namespace: 't',
      uid: 'u-ws',
    });
    assert.equal(event.type, 'Warning');
    assert.equal(event.reason, 'OperationRefused');
    assert.match(
      String(event.message),
      /^creating Operation stop1 \(stop\) refused for alice: 409 operation_in_progress: /,
    );
    assert.equal(event.metadata.namespace, 't');
  });

  it('an Operation whose Workspace does not exist is recorded on its Project; a refused isolated Workspace on its Project', async () => {
    const { ctx } = cluster([project]);
    assert.deepEqual(
      refusalSubjects(request({ object: stop('gone') })).map((s) => s.name),
      ['gone', 'p1'],
    );
    let posted: KubeObject & Record<string, unknown> = { metadata: {} };
    await recordRefusal(
      request({ object: stop('gone') }),
      { allowed: false, code: 400, message: 'workspace_not_found: x' },
      {
        ...ctx,
        post: <T>(_p: string, body: unknown) => Promise.resolve((posted = body as typeof posted) as T),
      },
    );
    assert.equal((posted.involvedObject as { uid: string }).uid, 'u-p1');
    const isolated = {
      ...main,
      metadata: { name: 't1', namespace: 't' },
      spec: { ...main.spec, kind: 'isolated' as const, baseRef: 'dev' },
    };
    const e = refusalEvent(
      request({ object: isolated }),
      { allowed: false, code: 400, message: 'base_ref_not_synced: dev' },
      project,
      NOW,
    );
    assert.equal((e?.involvedObject as { kind: string }).kind, 'Project');
    assert.match(String(e?.message), /^creating Workspace t1 refused for alice: 400 base_ref_not_synced: dev$/);
  });

  it('a refused Project has no object yet: the Event names it (no UID); a refused update is recorded on the object itself', () => {
    const bad = { ...project, metadata: { name: 'p2', namespace: 't' } };
    const e = refusalEvent(
      request({ object: bad }),
      { allowed: false, code: 400, message: 'invalid_repository_url: x' },
      undefined,
      NOW,
    );
    assert.deepEqual(e?.involvedObject, { apiVersion: AV, kind: 'Project', name: 'p2', namespace: 't', uid: '' });
    assert.equal(e?.reason, 'ProjectRefused');
    const node = { username: 'system:serviceaccount:t:kruntimes-devws-node' };
    const upd = request({ object: main, oldObject: main, operation: 'UPDATE', userInfo: node });
    const u = refusalEvent(upd, { allowed: false, code: 409, message: 'stale_node: generation 1' }, undefined, NOW);
    assert.equal((u?.involvedObject as { uid: string }).uid, 'u-ws');
    assert.match(
      String(u?.message),
      /^update Workspace p1-main refused for system:serviceaccount:t:kruntimes-devws-node: 409 stale_node/,
    );
  });

  it('nothing for an allowed request or a dry run; identical refusals within a minute share one Event name, a later one is new', async () => {
    const deny = { allowed: false, code: 409, message: 'operation_in_progress: p1-create' };
    const req = request({ object: stop() });
    assert.equal(refusalEvent(req, { allowed: true }, main, NOW), undefined);
    assert.equal(refusalEvent({ ...req, dryRun: true }, deny, main, NOW), undefined);
    const name = (at: string): string | undefined => refusalEvent(req, deny, main, new Date(at))?.metadata.name;
    assert.equal(name('2026-12-02T09:00:10Z'), name('2026-12-02T09:00:50Z'));
    assert.notEqual(name('2026-12-02T09:00:10Z'), name('2026-12-02T09:01:10Z'));
    const { ctx } = cluster([project, main, running]);
    let posts = 0;
    const counting = { ...ctx, post: <T>() => Promise.resolve((posts++, {}) as T) };
    assert.equal((await admit({ ...req, dryRun: true }, counting)).allowed, false);
    await new Promise((r) => setImmediate(r));
    assert.equal(posts, 0, 'a dry run records nothing');
  });

  it('credentialRef: a Project may name only a Secret its creator may read (403 credential_forbidden, recorded)', async () => {
    const withRef = (credentialRef: string): Project => ({
      ...project,
      metadata: { name: 'p2', namespace: 't' },
      spec: { repository: { ...project.spec.repository, credentialRef } },
    });
    const { ctx, posted } = cluster([]);
    assert.equal((await admit(request({ object: withRef('repo-cred') }), ctx)).allowed, true);
    const bob = request({ object: withRef('repo-cred'), userInfo: { username: 'bob' } });
    const r = await admit(bob, ctx);
    assert.deepEqual([r.allowed, r.code], [false, 403]);
    assert.match(r.message ?? '', /^credential_forbidden: bob may not read Secret repo-cred/);
    assert.equal((await admit(request({ object: withRef('other') }), ctx)).code, 403);
    const [, event] = (await posted[0]) as [string, KubeObject & Record<string, unknown>];
    assert.match(String(event.message), /^creating Project p2 refused for bob: 403 credential_forbidden/);
  });

  it('an Event that cannot be written leaves the refusal as it is', async () => {
    const { ctx } = cluster([project, main, running]);
    const failing = { ...ctx, post: () => Promise.reject(new Error('AlreadyExists')) };
    await recordRefusal(request({ object: stop() }), { allowed: false, code: 409, message: 'x' }, failing);
    assert.equal((await admit(request({ object: stop() }), failing)).code, 409);
  });
});
