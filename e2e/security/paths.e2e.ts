/**
 * Attacks on runtimed's file handling (issue 11, item 2), each performed by a Run's inline script
 * on a Runtime with a Filesystem artifact store (mounted in runtimed at /var/lib/kruntimes). The
 * Run replaces paths in /workspace with links to the store; runtimed must never follow them
 * (safe-dir.ts) and fails the Run with the stable reason UnsafePath instead.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isApiError } from '../../lib/kube/errors.ts';
import { E2E_ROOT } from '../cluster.ts';
import { admin, deleteNamespace, eventually, newNamespace } from '../helpers.ts';
import { GROUP, cond, createRun, filesystemStoreRuntime, finished, type RunObj } from '../runs-helpers.ts';

const STORE = '/var/lib/kruntimes';

async function createWs(ns: string, name: string): Promise<void> {
  await admin().create(`${GROUP}/namespaces/${ns}/persistentworkspaces`, {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'PersistentWorkspace',
    metadata: { name },
    spec: { runtime: 'bash' },
  });
  await eventually(`workspace ${name} Bound`, async () => {
    const w = await admin().get<RunObj>(`${GROUP}/namespaces/${ns}/persistentworkspaces/${name}`);
    return (w.status as { phase?: string } | undefined)?.phase === 'Bound' ? w : undefined;
  });
}

async function deleteWs(ns: string, name: string): Promise<void> {
  await admin().delete(`${GROUP}/namespaces/${ns}/persistentworkspaces/${name}`);
  await eventually(
    `workspace ${name} to be gone`,
    async () => {
      try {
        await admin().get(`${GROUP}/namespaces/${ns}/persistentworkspaces/${name}`);
        return false;
      } catch (e) {
        return isApiError(e, 404);
      }
    },
    60_000,
  );
}

function assertUnsafe(r: RunObj, message: RegExp): void {
  // The harm first (so the code before the fix shows it), then the stable reason.
  const names = (r.status?.artifactRefs ?? []).map((a) => String(a.name));
  assert.deepEqual(names, [], `${r.metadata.name} uploaded artifacts ${names.join(', ')}`);
  assert.equal(r.status?.phase, 'Failed', `${r.metadata.name}: ${r.status?.phase} ${r.status?.message ?? ''}`);
  assert.equal(cond(r, 'Completed')?.reason, 'UnsafePath', r.status?.message);
  assert.match(cond(r, 'Completed')?.message ?? '', message);
}

describe('security: runtimed never follows links a Run plants (issue 11 item 2)', function () {
  let ns: string;
  let volume: string;
  let secret: string;
  before(async () => {
    ns = await newNamespace('secfs');
    await filesystemStoreRuntime(ns, 1, { workspace: { emptyDir: { sizeLimit: '1Gi' } } });
    const pvc = await admin().get<RunObj>(`/api/v1/namespaces/${ns}/persistentvolumeclaims/artifacts`);
    volume = join(E2E_ROOT, 'volumes', String(pvc.spec.volumeName));
    // Another Run's artifact: what the attacks try to read or delete.
    await createRun(
      ns,
      { runtime: 'bash', source: { inline: 'echo top-secret > "$KRUNTIME_ARTIFACTS_DIR/secret.txt"' } },
      { name: 'victim' },
    );
    const v = await finished(ns, 'victim');
    assert.equal(v.status?.phase, 'Succeeded', v.status?.message);
    secret = join(volume, 'namespaces', ns, 'runs', String(v.metadata.uid), 'secret.txt');
    assert.equal(readFileSync(secret, 'utf8'), 'top-secret\n');
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it('a Run directory replaced by a link to the store does not upload the store as an artifact', async () => {
    const inline = `d=$(dirname "$KRUNTIME_OUTPUTS"); cd /; mv "$d" "$d.aside" && ln -s ${STORE} "$d"`;
    await createRun(ns, { runtime: 'bash', source: { inline } }, { name: 'steal-store' });
    assertUnsafe(await finished(ns, 'steal-store'), /is a symbolic link/);
  });

  it('a planted .kruntimes/runs link does not make runtimed write a later Run into the store', async () => {
    await createWs(ns, 'shared');
    const runs = '/workspace/persistent/shared/.kruntimes/runs';
    const inline = `cd /; mv ${runs} ${runs}.aside && ln -s ${STORE}/artifacts/namespaces ${runs}`;
    await createRun(ns, { runtime: 'bash', workspace: { name: 'shared' }, source: { inline } }, { name: 'plant' });
    const plant = await finished(ns, 'plant');
    const next = await createRun(
      ns,
      { runtime: 'bash', workspace: { name: 'shared' }, source: { inline: 'echo hello' } },
      { name: 'next' },
    );
    const n = await finished(ns, 'next');
    assert.ok(!existsSync(join(volume, 'namespaces', String(next.metadata.uid))), 'nothing written into the store');
    assertUnsafe(plant, /\.kruntimes\/runs" is a symbolic link/);
    assertUnsafe(n, /\.kruntimes\/runs" is a symbolic link/);
  });

  it('a workspace root replaced by a link does not make workspace cleanup delete the store', async () => {
    // The workspace is named like the namespace: /workspace/persistent/<ns> -> the store's namespaces/<ns>.
    await createWs(ns, ns);
    const inline = `cd /; mv /workspace/persistent /workspace/persistent.aside && ln -s ${STORE}/artifacts/namespaces /workspace/persistent`;
    await createRun(ns, { runtime: 'bash', workspace: { name: ns }, source: { inline } }, { name: 'redirect' });
    const r = await finished(ns, 'redirect');
    await deleteWs(ns, ns);
    assert.ok(existsSync(secret), "another Run's artifact survives the workspace cleanup");
    assertUnsafe(r, /persistent" is a symbolic link/);
  });
});
