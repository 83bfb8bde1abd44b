/**
 * `krt local demo-devws` (cli/local/devws-demo.ts) on the real cluster: the examples under
 * examples/devws/ run end to end — create_project (sync and clone), stop, start without a clone,
 * a re-sync after the repository moved on, an isolated Workspace cloning the new snapshot, and
 * delete_project — and the demo's Git Server configuration is gone afterwards.
 */
import assert from 'node:assert/strict';
import { runDevwsDemo } from '../cli/local/devws-demo.ts';
import { isApiError } from '../lib/kube/errors.ts';
import { E2E_HOST_ADDRESS } from './cluster.ts';
import { admin, deleteNamespace, newNamespace } from './helpers.ts';

describe('krt local demo-devws: examples/devws end to end', function () {
  this.timeout(300_000);
  let ns: string;
  before(async () => {
    ns = await newNamespace('devws-demo');
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it('runs the examples: create, stop, start, re-sync, an isolated Workspace on the new snapshot, delete_project', async () => {
    const said: string[] = [];
    const r = await runDevwsDemo({ admin: admin(), host: E2E_HOST_ADDRESS, say: (m) => said.push(m), namespace: ns });
    assert.match(r.mainCommit, /^[0-9a-f]{40}$/, said.join('\n'));
    assert.match(r.taskCommit, /^[0-9a-f]{40}$/);
    assert.notEqual(r.taskCommit, r.mainCommit, 'the isolated Workspace cloned the re-synced snapshot');
    assert.deepEqual(r.steps, {
      'demo-create': ['sandbox', 'node', 'clone', 'done'],
      'demo-stop': ['quiesce', 'terminate', 'done'],
      'demo-start': ['sandbox', 'node', 'done'],
      'demo-task-create': ['sandbox', 'node', 'clone', 'done'],
      'demo-delete': ['quiesce', 'terminate', 'cleanup', 'done'],
    });
    assert.ok(
      said.some((l) => /^op\/demo-create create_project: succeeded step done/.test(l)),
      said.join('\n'),
    );
    const configured = await admin()
      .get('/api/v1/namespaces/kruntimes-system/configmaps/kruntimes-devws')
      .then(() => true)
      .catch((err: unknown) => !isApiError(err, 404));
    assert.equal(configured, false, "the demo's Git Server configuration is removed");
  });
});
