/**
 * Run artifact download through API aggregation (artifacts.kruntimes.io) and `krt artifact
 * download`, on a real S3-compatible store: a credential holding only `get` on runs/artifacts
 * for one named Run downloads files and directory archives whose sha256 matches status, with
 * --extract unpacking them; other credentials are refused by the API server; bytes tampered in
 * the store and archives with unsafe paths are refused with nothing left behind.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { tempDir } from '../lib/fs/temp-dir.ts';
import { isApiError } from '../lib/kube/errors.ts';
import { rawTgz } from '../runtimed/artifacts/test-support.ts';
import { cluster } from './cluster.ts';
import { admin, apiServiceAvailable, deleteNamespace, eventually, newNamespace } from './helpers.ts';
import { grant, krt, saKubeconfig } from './krt.ts';
import {
  GROUP,
  bashRuntime,
  createRun,
  createRuntime,
  filesystemStoreRuntime,
  finished,
  runtimePods,
  withS3Store,
} from './runs-helpers.ts';
import { startS3Server, type S3Server } from './s3-server.ts';

type Ref = {
  name: string;
  type: string;
  digest: string;
  sizeBytes: number;
  location: { s3: { bucket: string; key: string } };
} & Record<string, unknown>;
const API = (ns: string, run: string, name = ''): string =>
  `/apis/artifacts.kruntimes.io/v1alpha1/namespaces/${ns}/runs/${run}/artifacts${name ? `/${name}` : ''}`;
const sha = (b: Buffer): string => `sha256:${createHash('sha256').update(b).digest('hex')}`;
const PRODUCE =
  'echo "hello artifact" > "$KRUNTIME_ARTIFACTS_DIR/dist.txt"; mkdir -p "$KRUNTIME_ARTIFACTS_DIR/site/css"; echo "<h1>hi</h1>" > "$KRUNTIME_ARTIFACTS_DIR/site/index.html"; echo "body{}" > "$KRUNTIME_ARTIFACTS_DIR/site/css/a.css"';
const tmp = (): string => tempDir('krt-dl-');

describe('Run artifact download through the aggregated API and krt', function () {
  let ns: string;
  let s3: S3Server;
  let refs: Ref[];
  let fetcher: string;
  before(async () => {
    ns = await newNamespace('artdl');
    s3 = await startS3Server('kruntimes-artifacts');
    await createRuntime(ns, 'bash', bashRuntime(await withS3Store(ns, s3, { replicas: 1 })));
    await runtimePods(ns, 'bash', 1);
    await apiServiceAvailable('artifacts.kruntimes.io');
    await createRun(ns, { runtime: 'bash', source: { inline: PRODUCE } }, { name: 'producer' });
    await createRun(
      ns,
      { runtime: 'bash', source: { inline: 'echo "secret" > "$KRUNTIME_ARTIFACTS_DIR/other.txt"' } },
      { name: 'other' },
    );
    await createRun(
      ns,
      { runtime: 'bash', source: { inline: 'head -c 3145728 /dev/urandom > "$KRUNTIME_ARTIFACTS_DIR/blob.bin"' } },
      { name: 'big' },
    );
    const p = await finished(ns, 'producer');
    assert.equal(p.status?.phase, 'Succeeded', p.status?.message);
    assert.equal((await finished(ns, 'other')).status?.phase, 'Succeeded');
    assert.equal((await finished(ns, 'big')).status?.phase, 'Succeeded');
    refs = (p.status?.artifactRefs ?? []) as Ref[];
    await grant(ns, 'fetcher', 'producer-artifacts', {
      apiGroups: ['artifacts.kruntimes.io'],
      resources: ['runs/artifacts'],
      resourceNames: ['producer', 'big'],
      verbs: ['get'],
    });
    fetcher = await saKubeconfig(ns, 'fetcher');
  });
  after(async () => {
    await deleteNamespace(ns);
    s3.stop();
  });

  it('serves discovery with runs/artifacts', async () => {
    const list = await admin().get<{ metadata: object; resources: { name: string; verbs: string[] }[] }>(
      '/apis/artifacts.kruntimes.io/v1alpha1',
    );
    assert.deepEqual(list.resources.find((r) => r.name === 'runs/artifacts')?.verbs, ['get']);
  });

  it('downloads every artifact with only runs/artifacts on that Run; digests match status', async () => {
    const out = tmp();
    let last = '';
    const r = await eventually(
      'krt artifact download as the fetcher',
      async () => {
        const x = await krt(['artifact', 'download', 'producer', '-o', out], fetcher);
        last = x.stderr;
        return x.code === 0 ? x : undefined;
      },
      20_000,
    ).catch((e: Error) => {
      throw new Error(`${e.message}: ${last}`);
    });
    assert.match(r.stdout, /dist\.txt -> .*dist\.txt \(\d+ bytes, sha256:[0-9a-f]{64}\)/);
    assert.deepEqual(readdirSync(out).sort(), ['dist.txt', 'site.tar.gz']);
    for (const ref of refs) {
      const file = join(out, ref.type === 'directory' ? `${ref.name}.tar.gz` : ref.name);
      assert.equal(sha(readFileSync(file)), ref.digest, `${ref.name} digest`);
    }
    assert.equal(readFileSync(join(out, 'dist.txt'), 'utf8'), 'hello artifact\n');
    const list = await krt(['artifact', 'list', 'producer', '-o', 'json'], fetcher);
    assert.equal(list.code, 0, list.stderr);
    assert.deepEqual(
      (JSON.parse(list.stdout) as { name: string; digest: string }[]).map((i) => `${i.name}=${i.digest}`).sort(),
      refs.map((x) => `${x.name}=${x.digest}`).sort(),
    );
  });

  it('extracts a directory artifact with --extract', async () => {
    const out = tmp();
    const r = await krt(['artifact', 'download', 'producer', 'site', '--extract', '-o', out], fetcher);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(readFileSync(join(out, 'site', 'index.html'), 'utf8'), '<h1>hi</h1>\n');
    assert.equal(readFileSync(join(out, 'site', 'css', 'a.css'), 'utf8'), 'body{}\n');
    assert.deepEqual(readdirSync(out), ['site']);
  });

  it('refuses credentials without get on runs/artifacts for the Run (API server RBAC)', async () => {
    const other = await krt(['artifact', 'download', 'other', '-o', tmp()], fetcher);
    assert.equal(other.code, 1);
    assert.match(other.stderr, /cannot get resource "runs\/artifacts" in API group "artifacts.kruntimes.io"/);
    await grant(ns, 'reader', 'reader-runs-and-logs', {
      apiGroups: ['kruntimes.io', 'logs.kruntimes.io'],
      resources: ['runs', 'runs/log'],
      verbs: ['get', 'list'],
    });
    const reader = await krt(['artifact', 'download', 'producer', '-o', tmp()], await saKubeconfig(ns, 'reader'));
    assert.equal(reader.code, 1);
    assert.match(reader.stderr, /forbidden.*runs\/artifacts/i);
  });

  it('answers bad input with a metav1.Status and a non-zero exit', async () => {
    await assert.rejects(
      admin().request('GET', API(ns, 'producer', 'missing')),
      (e: unknown) => isApiError(e, 404) && /has no artifact "missing"; it has "dist.txt", "site"/.test(e.message),
    );
    await assert.rejects(
      admin().request('GET', API(ns, 'ghost')),
      (e: unknown) => isApiError(e, 404) && /runs.kruntimes.io "ghost" not found/.test(e.message),
    );
    const unknown = await krt(['artifact', 'download', 'producer', 'missing', '-o', tmp()], fetcher);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /has no artifact "missing"; it has dist.txt, site/);
    const ghost = await krt(['artifact', 'download', 'ghost', '-n', ns, '-o', tmp()], cluster().kubeconfig);
    assert.equal(ghost.code, 1);
    assert.match(ghost.stderr, /"ghost" not found in namespace \S+ \(NotFound, HTTP 404\)/);
  });

  it('refuses bytes changed in the store: the server cuts the stream, krt keeps nothing', async () => {
    const ref = refs.find((x) => x.name === 'dist.txt')!;
    await s3.client.send(
      new PutObjectCommand({ Bucket: ref.location.s3.bucket, Key: ref.location.s3.key, Body: 'HELLO ARTIFACT\n' }),
    );
    await assert.rejects(
      admin().stream(API(ns, 'producer', 'dist.txt'), { accept: '*/*' }),
      (e: unknown) =>
        isApiError(e, 500) && /digest sha256:[0-9a-f]{64} does not match the reference digest/.test(e.message),
    );
    const out = tmp();
    const r = await krt(['artifact', 'download', 'producer', 'dist.txt', '-o', out], fetcher);
    assert.equal(r.code, 1);
    assert.deepEqual(readdirSync(out), []);
  });

  it('streams a large artifact (beyond the buffered size) and cuts it when the stored bytes changed', async () => {
    const big = (
      await admin().get<{ metadata: object; status: { artifactRefs: Ref[] } }>(`${GROUP}/namespaces/${ns}/runs/big`)
    ).status.artifactRefs[0]!;
    const out = tmp();
    const ok = await krt(['artifact', 'download', 'big', '-o', out], fetcher);
    assert.equal(ok.code, 0, ok.stderr);
    const bytes = readFileSync(join(out, 'blob.bin'));
    assert.equal(bytes.length, 3145728);
    assert.equal(sha(bytes), big.digest);
    bytes.writeUInt8(bytes.readUInt8(bytes.length - 1) ^ 0xff, bytes.length - 1);
    await s3.client.send(
      new PutObjectCommand({ Bucket: big.location.s3.bucket, Key: big.location.s3.key, Body: bytes }),
    );
    const res = await admin().stream(API(ns, 'big', 'blob.bin'), { accept: '*/*' });
    const got = await new Promise<{ bytes: number; complete: boolean }>((resolve) => {
      let n = 0;
      res.on('data', (c: Buffer) => {
        n += c.length;
      });
      res.on('error', () => undefined);
      res.on('close', () => resolve({ bytes: n, complete: res.complete }));
    });
    assert.ok(
      !got.complete && got.bytes < big.sizeBytes,
      `a tampered object must not arrive complete (got ${got.bytes} of ${big.sizeBytes} bytes, complete=${got.complete})`,
    );
    const again = tmp();
    const bad = await krt(['artifact', 'download', 'big', '-o', again], fetcher);
    assert.equal(bad.code, 1);
    assert.deepEqual(readdirSync(again), []);
  });

  it('refuses to extract an archive with unsafe paths and writes nothing outside', async () => {
    const run = await admin().get<{ metadata: { uid: string }; status: { artifactRefs: Ref[] } }>(
      `${GROUP}/namespaces/${ns}/runs/producer`,
    );
    const bytes = rawTgz([
      { name: 'ok.txt', data: 'fine' },
      { name: '../escaped.txt', data: 'pwned' },
    ]);
    const key = `e2e/namespaces/${ns}/runs/${run.metadata.uid}/evil`;
    await s3.client.send(new PutObjectCommand({ Bucket: 'kruntimes-artifacts', Key: key, Body: bytes }));
    const evil = {
      ...refs.find((x) => x.name === 'site')!,
      name: 'evil',
      sizeBytes: bytes.length,
      digest: sha(bytes),
      location: { s3: { bucket: 'kruntimes-artifacts', key } },
    };
    await admin().patch(`${GROUP}/namespaces/${ns}/runs/producer/status`, {
      status: { artifactRefs: [...run.status.artifactRefs, evil] },
    });
    const parent = tmp();
    const out = join(parent, 'out');
    const r = await krt(['artifact', 'download', 'producer', 'evil', '--extract', '-o', out], fetcher);
    assert.equal(r.code, 1, r.stdout);
    assert.match(r.stderr, /escaped\.txt/);
    assert.ok(!existsSync(join(parent, 'escaped.txt')));
    assert.deepEqual(readdirSync(out), []);
    const raw = await krt(['artifact', 'download', 'producer', 'evil', '-o', out], fetcher);
    assert.equal(raw.code, 0, raw.stderr);
    assert.equal(sha(readFileSync(join(out, 'evil.tar.gz'))), sha(bytes));
  });
});

describe("Run artifact download from a Filesystem store (through the Runtime's runtimed)", function () {
  let ns: string;
  before(async () => {
    ns = await newNamespace('artfs');
    await filesystemStoreRuntime(ns, 2);
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it("downloads with digests verified, also after the Run's own Runtime Pod is gone", async () => {
    await createRun(ns, { runtime: 'bash', source: { inline: PRODUCE } }, { name: 'fsproducer' });
    const p = await finished(ns, 'fsproducer');
    assert.equal(p.status?.phase, 'Succeeded', p.status?.message);
    const fsRefs = (p.status?.artifactRefs ?? []) as Ref[];
    await grant(ns, 'fetcher', 'fs-artifacts', {
      apiGroups: ['artifacts.kruntimes.io'],
      resources: ['runs/artifacts'],
      resourceNames: ['fsproducer'],
      verbs: ['get'],
    });
    const fetcher = await saKubeconfig(ns, 'fetcher');
    const check = async (): Promise<void> => {
      const out = tmp();
      let last = '';
      await eventually(
        'krt artifact download from the Filesystem store',
        async () => {
          const x = await krt(['artifact', 'download', 'fsproducer', '-o', out], fetcher);
          last = x.stderr;
          return x.code === 0 ? x : undefined;
        },
        30_000,
        500,
      ).catch((e: Error) => {
        throw new Error(`${e.message}: ${last}`);
      });
      for (const ref of fsRefs)
        assert.equal(
          sha(readFileSync(join(out, ref.type === 'directory' ? `${ref.name}.tar.gz` : ref.name))),
          ref.digest,
          `${ref.name} digest`,
        );
      assert.equal(readFileSync(join(out, 'dist.txt'), 'utf8'), 'hello artifact\n');
    };
    await check();
    // The Pod that produced them goes away: another Pod of the Runtime (same PVC) serves them.
    await admin().delete(`/api/v1/namespaces/${ns}/pods/${p.status?.assignedPod}`, { gracePeriodSeconds: 0 });
    await check();
    // An artifact name the Run does not have is a plain 404.
    const missing = await admin()
      .request('GET', API(ns, 'fsproducer', 'nope'))
      .catch((e: unknown) => e);
    assert.ok(isApiError(missing, 404), String(missing));
  });
});
