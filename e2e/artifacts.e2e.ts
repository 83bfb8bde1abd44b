/**
 * Artifacts on the real cluster: uploads to the Filesystem store (shared PVC) and to a real
 * S3-compatible server (versitygw) with sha256 digests, rejection of invalid artifacts,
 * artifact inputs staged into a later Run, malicious input archives rejected with nothing
 * written outside, and artifacts deleted with their Run through the cleanup finalizer.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { isApiError } from '../lib/kube/errors.ts';
import { rawTgz } from '../runtimed/artifacts/test-support.ts';
import { E2E_ROOT } from './cluster.ts';
import { admin, deleteNamespace, eventually, newNamespace } from './helpers.ts';
import {
  bashRuntime,
  cond,
  createRun,
  createRuntime,
  filesystemStoreRuntime,
  finished,
  getRun,
  runtimePods,
  type RunObj,
  withS3Store,
} from './runs-helpers.ts';
import { startS3Server, type S3Server } from './s3-server.ts';

type Ref = {
  name: string;
  type: string;
  digest: string;
  sizeBytes: number;
  location: { filesystem?: { path: string }; s3?: { bucket: string; key: string } };
};
const refs = (r: RunObj): Ref[] => (r.status?.artifactRefs ?? []) as unknown as Ref[];
const sha = (b: Buffer): string => `sha256:${createHash('sha256').update(b).digest('hex')}`;
const PRODUCE =
  'echo "hello artifact" > "$KRUNTIME_ARTIFACTS_DIR/dist.txt"; mkdir -p "$KRUNTIME_ARTIFACTS_DIR/site/css"; echo "<h1>hi</h1>" > "$KRUNTIME_ARTIFACTS_DIR/site/index.html"; echo "body{}" > "$KRUNTIME_ARTIFACTS_DIR/site/css/a.css"';
const CONSUME =
  'cat in/dist.txt; echo "files=$(find in/site -type f | sort | tr "\\n" " ")" >> "$KRUNTIME_OUTPUTS"; echo "text=$(cat in/dist.txt)" >> "$KRUNTIME_OUTPUTS"';

async function gone(ns: string, name: string): Promise<void> {
  await admin().delete(`/apis/kruntimes.io/v1alpha1/namespaces/${ns}/runs/${name}`);
  await eventually(
    `Run ${name} to be deleted (finalizer released)`,
    async () => {
      try {
        await getRun(ns, name);
        return false;
      } catch (e) {
        return isApiError(e, 404);
      }
    },
    60_000,
  );
}

describe('artifacts: S3 store (versitygw)', function () {
  let ns: string;
  let s3: S3Server;
  before(async () => {
    ns = await newNamespace('s3');
    s3 = await startS3Server('kruntimes-artifacts');
    await createRuntime(ns, 'bash', bashRuntime(await withS3Store(ns, s3, { replicas: 1 })));
    await runtimePods(ns, 'bash', 1);
  });
  after(async () => {
    await deleteNamespace(ns);
    s3.stop();
  });

  it('uploads files and directory archives with correct digests and stages them into a later Run', async () => {
    await createRun(ns, { runtime: 'bash', source: { inline: PRODUCE } }, { name: 'producer' });
    const p = await finished(ns, 'producer');
    assert.equal(p.status?.phase, 'Succeeded', p.status?.message);
    assert.ok((p.metadata.finalizers ?? []).includes('kruntimes.io/artifact-cleanup'));
    const byName = new Map(refs(p).map((r) => [r.name, r]));
    assert.deepEqual([...byName.keys()].sort(), ['dist.txt', 'site']);
    for (const r of byName.values()) {
      const obj = await s3.client.send(
        new GetObjectCommand({ Bucket: r.location.s3!.bucket, Key: r.location.s3!.key }),
      );
      const body = Buffer.from(await obj.Body!.transformToByteArray());
      assert.equal(sha(body), r.digest, `${r.name} digest`);
      assert.equal(body.length, r.sizeBytes);
      assert.match(r.location.s3!.key, new RegExp(`^e2e/namespaces/${ns}/runs/${p.metadata.uid}/`));
    }
    assert.equal(byName.get('site')?.type, 'directory');
    await createRun(
      ns,
      {
        runtime: 'bash',
        source: { inline: CONSUME },
        artifactInputs: [
          { path: 'in/dist.txt', artifactRef: byName.get('dist.txt') },
          { path: 'in/site', artifactRef: byName.get('site') },
        ],
      },
      { name: 'consumer' },
    );
    const c = await finished(ns, 'consumer');
    assert.equal(c.status?.phase, 'Succeeded', c.status?.message);
    assert.deepEqual(c.status?.outputs, { text: 'hello artifact', files: 'in/site/css/a.css in/site/index.html' });
  });

  it('rejects a symlink artifact with ArtifactInvalid and uploads nothing', async () => {
    await createRun(
      ns,
      { runtime: 'bash', source: { inline: 'ln -s /etc/passwd "$KRUNTIME_ARTIFACTS_DIR/passwd"' } },
      { name: 'sneaky' },
    );
    const r = await finished(ns, 'sneaky');
    assert.equal(r.status?.phase, 'Failed');
    assert.equal(cond(r, 'Completed')?.reason, 'ArtifactInvalid');
    assert.match(r.status?.message ?? '', /symbolic links are not allowed/);
    const listed = await s3.client.send(
      new ListObjectsV2Command({
        Bucket: 'kruntimes-artifacts',
        Prefix: `e2e/namespaces/${ns}/runs/${r.metadata.uid}/`,
      }),
    );
    assert.equal(listed.KeyCount ?? 0, 0);
  });

  for (const [title, entries] of [
    ['a symlink entry', [{ name: 'link', type: '2', linkname: '/etc/passwd' }]],
    ['a ../ traversal entry', [{ name: '../../escaped.txt', data: 'pwned' }]],
    ['an absolute path entry', [{ name: '/tmp/krt-abs-escape.txt', data: 'pwned' }]],
  ] as const) {
    it(`rejects an input archive with ${title} and writes nothing outside`, async () => {
      const bytes = rawTgz(entries.map((e) => ({ ...e })));
      const fakeUid = `00000000-0000-4000-8000-${String(Date.now()).slice(-12).padStart(12, '0')}`;
      const key = `e2e/namespaces/${ns}/runs/${fakeUid}/evil`;
      await s3.client.send(new PutObjectCommand({ Bucket: 'kruntimes-artifacts', Key: key, Body: bytes }));
      const ref = {
        name: 'evil',
        driver: 's3',
        type: 'directory',
        location: { s3: { bucket: 'kruntimes-artifacts', key } },
        sizeBytes: bytes.length,
        digest: sha(bytes),
        createdAt: new Date().toISOString(),
      };
      const name = `evil-${title.split(' ')[1]!.replace(/[^a-z]/g, '') || 'abs'}`;
      await createRun(
        ns,
        {
          runtime: 'bash',
          source: { inline: 'echo should-not-run' },
          artifactInputs: [{ path: 'in/evil', artifactRef: ref }],
        },
        { name },
      );
      const r = await finished(ns, name);
      assert.equal(r.status?.phase, 'Failed');
      assert.equal(cond(r, 'Completed')?.reason, 'ArtifactInputInvalid', r.status?.message);
      assert.ok(!existsSync('/tmp/krt-abs-escape.txt'));
      const pods = readdirSync(join(E2E_ROOT, 'nodes'));
      for (const n of pods) assert.ok(!readdirSync(join(E2E_ROOT, 'nodes', n)).includes('escaped.txt'));
    });
  }

  it("deletes the Run's artifacts when the Run is deleted", async () => {
    const p = await getRun(ns, 'producer');
    await gone(ns, 'producer');
    for (const r of refs(p)) {
      await assert.rejects(
        s3.client.send(new HeadObjectCommand({ Bucket: r.location.s3!.bucket, Key: r.location.s3!.key })),
      );
    }
  });
});

describe('artifacts: Filesystem store (shared PVC)', function () {
  let ns: string;
  before(async () => {
    ns = await newNamespace('fsart');
    await filesystemStoreRuntime(ns, 2);
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it('stores artifacts on the volume with digests, stages them, and deletes them with the Run', async () => {
    const pvc = await admin().get<RunObj>(`/api/v1/namespaces/${ns}/persistentvolumeclaims/artifacts`);
    const volumeDir = join(E2E_ROOT, 'volumes', String(pvc.spec.volumeName));
    await createRun(ns, { runtime: 'bash', source: { inline: PRODUCE } }, { name: 'producer' });
    const p = await finished(ns, 'producer');
    assert.equal(p.status?.phase, 'Succeeded', p.status?.message);
    for (const r of refs(p)) {
      const file = join(volumeDir, r.location.filesystem!.path);
      assert.equal(sha(readFileSync(file)), r.digest);
    }
    await createRun(
      ns,
      {
        runtime: 'bash',
        source: { inline: CONSUME },
        artifactInputs: refs(p).map((r) => ({ path: r.name === 'site' ? 'in/site' : 'in/dist.txt', artifactRef: r })),
      },
      { name: 'consumer' },
    );
    const c = await finished(ns, 'consumer');
    assert.deepEqual(c.status?.outputs, { text: 'hello artifact', files: 'in/site/css/a.css in/site/index.html' });
    await gone(ns, 'producer');
    for (const r of refs(p)) assert.ok(!existsSync(join(volumeDir, r.location.filesystem!.path)), `${r.name} deleted`);
  });
});
