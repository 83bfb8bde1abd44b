import assert from 'node:assert/strict';
import { parse } from 'yaml';
import { apiserverArgs, kubeletAddressTypes, layout } from './components.ts';
import { localizeForKubelet } from './install.ts';
import {
  cniConfig,
  containerdConfig,
  HOSTS_MARKER,
  hostsWithNode,
  kubeletArgs,
  kubeletConfig,
  kubeletLayout,
  POD_GATEWAY,
} from './kubelet-config.ts';
import { mountsUnder } from './kubelet-node.ts';
import { readyPodIP } from './node-services.ts';

const k = kubeletLayout('/env');
const ports = { etcdClient: 1, etcdPeer: 2, apiserver: 3, kcm: 4, scheduler: 5, nodes: [6] };

describe('kubelet node kind configuration', () => {
  it('keeps containerd, CNI and kubelet state under the environment root', () => {
    for (const p of Object.values(k) as string[]) assert.ok(p.startsWith('/env/kubelet-node'), p);
    const toml = containerdConfig(k, '/bin-dir');
    assert.match(toml, /^version = 3$/m);
    assert.match(toml, /restrict_oom_score_adj = true/);
    assert.match(toml, /netns_mounts_under_state_dir = true/);
    assert.match(toml, /BinaryName = "\/bin-dir\/runc"/);
    assert.match(toml, /SystemdCgroup = false/);
    assert.doesNotMatch(toml, /\/var\/lib\/containerd|\/run\/containerd/);
    const cni = JSON.parse(cniConfig(k)) as { plugins: { ipam?: { dataDir: string }; ipMasq?: boolean }[] };
    assert.equal(cni.plugins[0]?.ipam?.dataDir, '/env/kubelet-node/cni/networks');
    assert.equal(cni.plugins[0]?.ipMasq, false, 'nothing is NATed off the machine');
  });

  it('configures the kubelet for this machine: loopback only, cgroupfs, cgroup v1 and swap tolerated', () => {
    const cfg = parse(
      kubeletConfig(k, {
        port: 10250,
        healthzPort: 10248,
        clientCaFile: 'ca',
        servingCertFile: 'c',
        servingKeyFile: 'k',
      }),
    ) as Record<string, unknown>;
    assert.equal(cfg.address, '127.0.0.1');
    assert.equal(cfg.healthzBindAddress, '127.0.0.1');
    assert.equal(cfg.readOnlyPort, 0);
    assert.equal(cfg.cgroupDriver, 'cgroupfs');
    assert.equal(cfg.failCgroupV1, false);
    assert.equal(cfg.failSwapOn, false);
    assert.equal(cfg.podLogsDir, '/env/kubelet-node/pod-logs');
    assert.deepEqual(cfg.authentication, {
      anonymous: { enabled: false },
      webhook: { enabled: true },
      x509: { clientCAFile: 'ca' },
    });
    assert.deepEqual((cfg.authorization as { mode: string }).mode, 'Webhook');
    const args = kubeletArgs(k, 'n1', '/env/node-n1.kubeconfig');
    assert.ok(args.includes('--root-dir=/env/kubelet-node/kubelet'));
    assert.ok(args.includes('--cert-dir=/env/kubelet-node/kubelet/pki'));
    assert.ok(args.includes('--hostname-override=n1'));
  });

  it('has the API server dial the kubelet by Hostname, and the node agent by InternalIP as before', () => {
    assert.equal(kubeletAddressTypes('kubelet'), 'Hostname,InternalIP');
    assert.equal(kubeletAddressTypes(undefined), 'InternalIP');
    assert.ok(apiserverArgs(layout('/env'), ports).includes('--kubelet-preferred-address-types=InternalIP'));
    assert.ok(
      apiserverArgs(layout('/env'), ports, 'kubelet').includes('--kubelet-preferred-address-types=Hostname,InternalIP'),
    );
  });

  it('adds and removes exactly one marked /etc/hosts line', () => {
    const hosts = '127.0.0.1 localhost\n::1 localhost\n';
    const added = hostsWithNode(hosts, 'n1');
    assert.equal(added, `${hosts}127.0.0.1 n1 ${HOSTS_MARKER}\n`);
    assert.equal(hostsWithNode(added, 'n1'), added, 'idempotent');
    assert.equal(hostsWithNode(added, undefined), hosts);
  });

  it('finds the mounts under the root, deepest first, and nothing outside it', () => {
    const mi = [
      '22 1 8:1 / / rw - ext4 /dev/vda rw',
      '30 22 0:40 / /env/kubelet-node/containerd/state/x rw - overlay overlay rw',
      '31 30 0:41 / /env/kubelet-node/containerd/state/x/rootfs/a rw - tmpfs tmpfs rw',
      '32 22 0:42 / /env-other/y rw - tmpfs tmpfs rw',
    ].join('\n');
    assert.deepEqual(mountsUnder(mi, '/env/kubelet-node'), [
      '/env/kubelet-node/containerd/state/x/rootfs/a',
      '/env/kubelet-node/containerd/state/x',
    ]);
  });

  it('has the extension server listen on its Pod IP, never on the host network', () => {
    const env = [
      { name: 'KRT_LISTEN_ADDRESS', value: '127.0.0.1' },
      { name: 'KRT_HTTPS_PORT', value: '4443' },
    ];
    const docs = localizeForKubelet([
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'kruntimes-extension' },
        spec: { template: { spec: { containers: [{ env }] } } },
      },
    ]);
    const spec = (docs[0]!.spec as { template: { spec: { hostNetwork?: boolean; containers: { env: unknown[] }[] } } })
      .template.spec;
    assert.equal(spec.hostNetwork, undefined);
    assert.deepEqual(spec.containers[0]!.env, [{ name: 'KRT_HTTPS_PORT', value: '4443' }]);
  });

  it('allows plain HTTP OpenSandbox servers at the bridge gateway (the host as Pods see it) where the overlay allows 127.0.0.1', () => {
    const docs = localizeForKubelet(
      ['kruntimes-extension', 'kruntimes-functions', 'other'].map((name) => ({
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name },
        spec: {
          template: {
            spec: { containers: [{ env: [{ name: 'KRT_OPENSANDBOX_INSECURE_HOSTS', value: '127.0.0.1' }] }] },
          },
        },
      })),
    );
    const hosts = docs.map(
      (d) =>
        (d.spec as { template: { spec: { containers: { env: { value: string }[] }[] } } }).template.spec.containers[0]!
          .env[0]!.value,
    );
    assert.deepEqual(hosts, [`127.0.0.1,${POD_GATEWAY}`, `127.0.0.1,${POD_GATEWAY}`, '127.0.0.1']);
  });

  it('relays to the newest ready, not terminating Pod', () => {
    const pod = (
      ip: string,
      ready: boolean,
      created: string,
      deleting = false,
    ): Parameters<typeof readyPodIP>[0][0] => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: ip, creationTimestamp: created, ...(deleting ? { deletionTimestamp: created } : {}) },
      status: { podIP: ip, conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
    });
    assert.equal(
      readyPodIP([pod('10.88.0.2', true, '2026-01-01T00:00:00Z'), pod('10.88.0.3', true, '2026-01-02T00:00:00Z')]),
      '10.88.0.3',
    );
    assert.equal(
      readyPodIP([pod('10.88.0.2', true, '2026-01-01T00:00:00Z'), pod('10.88.0.3', false, '2026-01-02T00:00:00Z')]),
      '10.88.0.2',
    );
    assert.equal(readyPodIP([pod('10.88.0.3', true, '2026-01-02T00:00:00Z', true)]), undefined);
  });
});
