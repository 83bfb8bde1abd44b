/**
 * Large artifact downloads through API aggregation (issue 11 item 11): a measurement, not part
 * of the suite (it moves hundreds of MiB). On the e2e cluster, a Run produces a BENCH_MIB MiB
 * random file on a Filesystem store; then
 *   1. `krt artifact download` fetches it at full speed (time, MB/s, digest checked);
 *   2. a reader paced at BENCH_PACE_MIBS MiB/s reads the same URL so the transfer lasts longer
 *      than kube-apiserver's --request-timeout (60 s): how long and how many bytes until it ends.
 *   flock /tmp/krt-cluster.lock npx mocha --no-config --node-option import=tsx --extension ts \
 *     --timeout 900000 --require e2e/setup.ts --reporter spec bench/artifact-download.e2e.ts
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { admin, apiServiceAvailable, deleteNamespace, newNamespace } from '../e2e/helpers.ts';
import { krt, saKubeconfig, grant } from '../e2e/krt.ts';
import { bashRuntime, createRun, createRuntime, finished, runtimePods } from '../e2e/runs-helpers.ts';

const MIB = Number(process.env.BENCH_MIB ?? '300');
const PACE = Number(process.env.BENCH_PACE_MIBS ?? '2');
const sleep = (n: number): Promise<void> => new Promise((r) => setTimeout(r, n));

describe('bench: large artifact download through the aggregated API', function () {
  let ns: string;
  let kubeconfig: string;
  let digest: string;
  before(async () => {
    ns = await newNamespace('bigdl');
    await admin().create(`/api/v1/namespaces/${ns}/persistentvolumeclaims`, {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'artifacts' },
      spec: { accessModes: ['ReadWriteMany'], resources: { requests: { storage: '2Gi' } } },
    });
    await createRuntime(
      ns,
      'bash',
      bashRuntime({
        replicas: 1,
        artifactStore: { driver: 'filesystem', filesystem: { volumeClaimName: 'artifacts' } },
      }),
    );
    await runtimePods(ns, 'bash', 1);
    await apiServiceAvailable('artifacts.kruntimes.io');
    const inline = `head -c $((${MIB} * 1048576)) /dev/urandom > "$KRUNTIME_ARTIFACTS_DIR/big.bin"`;
    await createRun(ns, { runtime: 'bash', source: { inline } }, { name: 'big' });
    const r = await finished(ns, 'big', 600_000);
    if (r.status?.phase !== 'Succeeded') throw new Error(`producer: ${r.status?.message}`);
    digest = String((r.status?.artifactRefs?.[0] as { digest?: string } | undefined)?.digest);
    await grant(ns, 'fetcher', 'big-artifacts', {
      apiGroups: ['artifacts.kruntimes.io'],
      resources: ['runs/artifacts'],
      resourceNames: ['big'],
      verbs: ['get'],
    });
    kubeconfig = await saKubeconfig(ns, 'fetcher');
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it(`krt artifact download of ${MIB} MiB at full speed`, async () => {
    const out = mkdtempSync(join(tmpdir(), 'krt-bigdl-'));
    const t0 = Date.now();
    const x = await krt(['artifact', 'download', 'big', 'big.bin', '-o', out], kubeconfig);
    const secs = (Date.now() - t0) / 1000;
    const got =
      x.code === 0
        ? `sha256:${createHash('sha256')
            .update(readFileSync(join(out, 'big.bin')))
            .digest('hex')}`
        : '';
    console.log(
      `    krt download: exit ${x.code} in ${secs.toFixed(1)} s (${(MIB / secs).toFixed(1)} MiB/s), digest ${got === digest ? 'matches' : 'DIFFERS'} ${x.stderr.trim().slice(0, 300)}`,
    );
    rmSync(out, { recursive: true, force: true });
  });

  it(`a reader paced at ${PACE} MiB/s (longer than the 60 s request timeout)`, async () => {
    const path = `/apis/artifacts.kruntimes.io/v1alpha1/namespaces/${ns}/runs/big/artifacts/big.bin`;
    const t0 = Date.now();
    let bytes = 0;
    let end = 'complete';
    try {
      const res = await admin().stream(path);
      for await (const chunk of res) {
        bytes += (chunk as Buffer).length;
        const due = (bytes / (PACE * 1048576)) * 1000 - (Date.now() - t0);
        if (due > 0) await sleep(due);
      }
      if (bytes !== MIB * 1048576) end = 'short';
    } catch (err) {
      end = `error: ${err instanceof Error ? err.message : String(err)}`;
    }
    const secs = (Date.now() - t0) / 1000;
    console.log(
      `    paced reader: ${end} after ${secs.toFixed(1)} s with ${(bytes / 1048576).toFixed(1)} of ${MIB} MiB`,
    );
  });
});
