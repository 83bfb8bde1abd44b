import assert from 'node:assert/strict';
import { FakeState } from '../../lib/fn/fake-state.ts';
import { R } from '../../lib/fn/resources.ts';
import type { Operation } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import type { Workspace, WorkspaceStatus } from '../workspace-controller/lifecycle.ts';
import { sweep } from './index.ts';

const lastUsed = '2026-07-06T12:00:00Z';
const now = new Date('2026-07-06T12:01:01Z'); // 61 s after lastUsedTime
function ws(name: string, spec: Partial<Workspace['spec']> = {}, status: WorkspaceStatus = {}): Workspace {
  return {
    metadata: { name, namespace: 'ns', uid: `uid-${name}`, resourceVersion: '7' },
    spec: { runtime: 'bash', cleanupPolicy: 'DeleteAfterTTL', ttlSecondsAfterUnused: 60, ...spec },
    status: {
      phase: 'Bound',
      boundPod: 'p1',
      boundPodUID: 'u1',
      path: `/workspace/persistent/${name}`,
      lastUsedTime: lastUsed,
      ...status,
    },
  };
}
const run = (name: string, workspace: string, phase: string): KubeObject => ({
  metadata: { name, namespace: 'ns' },
  spec: { runtime: 'bash', workspace: { name: workspace } },
  status: { phase },
});
const targets = (ops: Operation[]): string[] =>
  ops.map((o) => `${o.op}:${o.op === 'status' ? o.object.metadata.name : o.op === 'delete' ? o.name : ''}`);

describe('workspace-ttl sweep (seed 000 cleanup order)', () => {
  it('writes Released (resourceVersion-guarded) before it requests the deletion', () => {
    const ops = sweep({ state: new FakeState([[R.persistentWorkspaces, ws('old')]]), now });
    assert.deepEqual(targets(ops), ['status:old', 'delete:old']);
    const st = ops[0] as Extract<Operation, { op: 'status' }>;
    const s = st.object.status as WorkspaceStatus;
    assert.equal(s.phase, 'Released');
    assert.equal(st.object.metadata.resourceVersion, '7');
    assert.equal(s.boundPodUID, 'u1', 'binding kept for runtimed');
    const c = s.conditions?.find((x) => x.type === 'Released');
    assert.equal(c?.reason, 'TTLExpired');
    assert.match(c?.message ?? '', /unused for ttlSecondsAfterUnused \(60s\)/);
    assert.deepEqual(ops[1], {
      op: 'delete',
      resource: R.persistentWorkspaces,
      namespace: 'ns',
      name: 'old',
      uid: 'uid-old',
    });
  });

  it('never deletes a nil TTL, Retain, not yet due, in use, unbound, Released or deleting workspace', () => {
    const deleting = ws('deleting');
    deleting.metadata.deletionTimestamp = lastUsed;
    const nilTtl = ws('nil-ttl');
    delete nilTtl.spec.ttlSecondsAfterUnused;
    const state = new FakeState([
      [R.persistentWorkspaces, nilTtl],
      [R.persistentWorkspaces, ws('retain', { cleanupPolicy: 'Retain' })],
      [R.persistentWorkspaces, ws('young', { ttlSecondsAfterUnused: 3600 })],
      [R.persistentWorkspaces, ws('busy')],
      [R.persistentWorkspaces, ws('pending', {}, { phase: 'Pending' })],
      [R.persistentWorkspaces, ws('released', {}, { phase: 'Released' })],
      [R.persistentWorkspaces, ws('lost', {}, { phase: 'Lost' })],
      [R.persistentWorkspaces, deleting],
      [R.runs, run('r1', 'busy', 'Running')],
      [R.runs, run('r2', 'nil-ttl', 'Succeeded')],
    ]);
    assert.deepEqual(sweep({ state, now }), []);
  });

  it('a terminal Run does not keep a due workspace; a Run in another namespace does not either', () => {
    const other = run('r', 'old', 'Running');
    other.metadata.namespace = 'elsewhere';
    const state = new FakeState([
      [R.persistentWorkspaces, ws('old')],
      [R.runs, run('done', 'old', 'Failed')],
      [R.runs, other],
    ]);
    assert.deepEqual(targets(sweep({ state, now })), ['status:old', 'delete:old']);
  });
});
