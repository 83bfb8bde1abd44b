/**
 * The kubelet node kind itself (KRT_NODE_KIND=kubelet, `make test-kubelet`; not part of
 * `make test`, whose mocha config only matches *.e2e.ts): a real kubelet registers a Ready
 * node on containerd, runs a plain Pod from a locally assembled image as the image's user,
 * serves its logs to the API server over the loopback kubelet port, and kruntimes' own
 * Runtime Pods become Ready and run a Run on real containers. `krt local image import` puts
 * images the checkout does not build into the node's containerd, and Pods run them.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubeObject } from '../../lib/kube/types.ts';
import { buildImageLayout, imageCacheRoot, type LocalImage } from '../../localenv/kubelet-images.ts';
import { E2E_NODE_KIND, E2E_NODES, E2E_ROOT } from '../cluster.ts';
import { admin, deleteNamespace, eventually, newNamespace } from '../helpers.ts';
import { krt } from '../krt.ts';
import { bashRuntime, createRun, createRuntime, finished, runtimePods } from '../runs-helpers.ts';

type Node = KubeObject & {
  status?: {
    nodeInfo?: { kubeletVersion?: string; containerRuntimeVersion?: string };
    conditions?: { type: string; status: string }[];
  };
};
type Pod = KubeObject & { status?: { phase?: string; podIP?: string } };

describe('kubelet node kind', function () {
  let ns: string;
  before(async function () {
    if (E2E_NODE_KIND !== 'kubelet') this.skip();
    ns = await newNamespace('kubelet');
  });
  after(async () => {
    if (ns) await deleteNamespace(ns);
  });

  it('registers a Ready node run by the upstream kubelet on containerd', async () => {
    const node = await admin().get<Node>(`/api/v1/nodes/${E2E_NODES[0]}`);
    assert.equal(node.status?.nodeInfo?.kubeletVersion, 'v1.34.4');
    assert.match(node.status?.nodeInfo?.containerRuntimeVersion ?? '', /^containerd:\/\/2\./);
    assert.ok(node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
  });

  it('runs a plain Pod from a local image as the image user, on the Pod network, with logs', async () => {
    await admin().create(`/api/v1/namespaces/${ns}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'plain' },
      spec: {
        restartPolicy: 'Never',
        automountServiceAccountToken: false,
        containers: [
          {
            name: 'c',
            image: 'ghcr.io/kruntimes/kruntimes:dev',
            command: ['sh', '-c', 'echo "uid=$(id -u) node=$(node --version) pid1=$(cat /proc/1/comm)"'],
          },
        ],
      },
    });
    const pod = await eventually(
      'the plain Pod to succeed',
      async () => {
        const p = await admin().get<Pod>(`/api/v1/namespaces/${ns}/pods/plain`);
        assert.notEqual(p.status?.phase, 'Failed');
        return p.status?.phase === 'Succeeded' ? p : undefined;
      },
      90_000,
    );
    assert.match(pod.status?.podIP ?? '', /^10\.88\./);
    const log = await admin().getText(`/api/v1/namespaces/${ns}/pods/plain/log`);
    // The image's USER, its own Node 22, and PID 1 is the container's process (a real PID namespace).
    assert.match(log, /uid=65532 node=v22\.\d+\.\d+ pid1=sh/);
  });

  it('turns a Runtime into Ready Pods and runs a Run in the runtime container', async () => {
    await createRuntime(ns, 'bash', bashRuntime());
    await runtimePods(ns, 'bash', 1);
    await createRun(
      ns,
      { runtime: 'bash', source: { inline: 'echo "uid=$(id -u)" >> "$KRUNTIME_OUTPUTS"\necho done' } },
      { name: 'hello' },
    );
    const run = await finished(ns, 'hello', 90_000);
    assert.equal(run.status?.phase, 'Succeeded', run.status?.message);
    assert.deepEqual(run.status?.outputs, { uid: '1000' });
  });

  it('imports image archives with krt local image import, and Pods run them without a pull', async () => {
    const work = mkdtempSync(join(tmpdir(), 'krt-e2e-import-'));
    try {
      // Two images of the cached pause layer (a static binary): one as an OCI layout directory, one as its tar.
      const image = (ref: string): LocalImage => ({
        name: ref,
        refs: [ref],
        layers: [join(imageCacheRoot(), 'pause-layer.tar')],
        baseLayers: 1,
        config: (diffIds: string[]) => ({
          architecture: 'amd64',
          os: 'linux',
          config: { User: '65535:65535', Entrypoint: ['/pause'] },
          rootfs: { type: 'layers', diff_ids: diffIds },
        }),
      });
      const dirRef = 'kruntimes.local/e2e/imported-dir:1';
      const tarRef = 'kruntimes.local/e2e/imported-tar:1';
      const { layout } = await buildImageLayout([image(dirRef)], join(work, 'a'));
      const tarred = await buildImageLayout([image(tarRef)], join(work, 'b'));
      execFileSync('tar', ['-C', tarred.layout, '-cf', join(work, 'b.tar'), '.']);
      const r = await krt(['local', 'image', 'import', '--dir', E2E_ROOT, layout, join(work, 'b.tar')], '/dev/null');
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(r.stdout.trim().split('\n'), [dirRef, tarRef]);
      for (const [name, ref] of [
        ['from-dir', dirRef],
        ['from-tar', tarRef],
      ] as const)
        await admin().create(`/api/v1/namespaces/${ns}/pods`, {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name },
          spec: {
            automountServiceAccountToken: false,
            containers: [{ name: 'c', image: ref, imagePullPolicy: 'Never' }],
          },
        });
      for (const name of ['from-dir', 'from-tar'])
        await eventually(
          `the Pod ${name} of an imported image to run`,
          async () => (await admin().get<Pod>(`/api/v1/namespaces/${ns}/pods/${name}`)).status?.phase === 'Running',
          90_000,
        );
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
});
