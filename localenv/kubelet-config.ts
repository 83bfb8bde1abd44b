/**
 * Pure configuration of the kubelet node kind (`krt local up --node=kubelet`): containerd's
 * config.toml, the KubeletConfiguration, the CNI network and the kubelet command line. Every
 * path the upstream components would put on the host is moved under the environment's root
 * where upstream allows it (see docs/kubelet-node.md for the few that cannot be moved).
 */
import { join } from 'node:path';
import { stringify } from 'yaml';

/** The sandbox ("pause") image containerd pins; assembled locally by scripts/build-images.sh. */
export const PAUSE_IMAGE = 'registry.k8s.io/pause:3.10.1';
/** The CNI bridge, its gateway (the host) and the Pod range. */
export const CNI_BRIDGE = 'krt-cni0';
export const CNI_NETWORK = 'kruntimes-pods';
export const POD_CIDR = '10.88.0.0/16';
export const POD_GATEWAY = '10.88.0.1';
/** Debian's containernetworking-plugins. */
export const CNI_BIN_DIR = '/usr/lib/cni';
/** Marker of the /etc/hosts line that makes the node name resolve to 127.0.0.1. */
export const HOSTS_MARKER = '# kruntimes-kubelet-node';

export interface KubeletLayout {
  root: string;
  containerdRoot: string;
  containerdState: string;
  containerdSocket: string;
  containerdConfig: string;
  runcRoot: string;
  cniConfDir: string;
  cniDataDir: string;
  kubeletRoot: string;
  kubeletCertDir: string;
  kubeletConfig: string;
  podLogsDir: string;
}

export function kubeletLayout(envRoot: string): KubeletLayout {
  const root = join(envRoot, 'kubelet-node');
  return {
    root,
    containerdRoot: join(root, 'containerd', 'root'),
    containerdState: join(root, 'containerd', 'state'),
    containerdSocket: join(root, 'containerd', 'containerd.sock'),
    containerdConfig: join(root, 'containerd', 'config.toml'),
    runcRoot: join(root, 'containerd', 'runc'),
    cniConfDir: join(root, 'cni', 'net.d'),
    cniDataDir: join(root, 'cni', 'networks'),
    kubeletRoot: join(root, 'kubelet'),
    kubeletCertDir: join(root, 'kubelet', 'pki'),
    kubeletConfig: join(root, 'kubelet', 'config.yaml'),
    podLogsDir: join(root, 'pod-logs'),
  };
}

const q = (s: string): string => JSON.stringify(s);

/**
 * containerd 2.x (config version 3). restrict_oom_score_adj: without CAP_SYS_RESOURCE (as in
 * this sandbox) runc cannot lower a child's oom_score_adj and every sandbox fails with
 * "can't get final child's PID from pipe". Network namespaces live under the state directory.
 */
export function containerdConfig(k: KubeletLayout, binDir: string): string {
  return `version = 3
root = ${q(k.containerdRoot)}
state = ${q(k.containerdState)}

[grpc]
  address = ${q(k.containerdSocket)}

[ttrpc]
  address = ${q(`${k.containerdSocket}.ttrpc`)}

[plugins.'io.containerd.internal.v1.opt']
  path = ${q(join(k.containerdRoot, 'opt'))}

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = ${q(PAUSE_IMAGE)}

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_cdi = false
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = ${q(join(binDir, 'runc'))}
        Root = ${q(k.runcRoot)}
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [${q(CNI_BIN_DIR)}]
    conf_dir = ${q(k.cniConfDir)}
    max_conf_num = 1

[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = '127.0.0.1'
  stream_server_port = '0'
`;
}

/** One bridge network, NAT off (nothing leaves the machine), host-local IPAM under the root. */
export function cniConfig(k: KubeletLayout): string {
  return JSON.stringify(
    {
      cniVersion: '1.0.0',
      name: CNI_NETWORK,
      plugins: [
        {
          type: 'bridge',
          bridge: CNI_BRIDGE,
          isGateway: true,
          ipMasq: false,
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            dataDir: k.cniDataDir,
            ranges: [[{ subnet: POD_CIDR, gateway: POD_GATEWAY }]],
            routes: [{ dst: '0.0.0.0/0' }],
          },
        },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    },
    null,
    2,
  );
}

export interface KubeletConfigInput {
  port: number;
  healthzPort: number;
  clientCaFile: string;
  servingCertFile: string;
  servingKeyFile: string;
}

/**
 * The KubeletConfiguration this machine needs: cgroupfs on hybrid cgroup v1, no swap check,
 * API and healthz on 127.0.0.1 only, read-only port off, x509 + webhook authn/z.
 */
export function kubeletConfig(k: KubeletLayout, i: KubeletConfigInput): string {
  return stringify({
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    address: '127.0.0.1',
    port: i.port,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    healthzPort: i.healthzPort,
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: true },
      x509: { clientCAFile: i.clientCaFile },
    },
    authorization: { mode: 'Webhook' },
    tlsCertFile: i.servingCertFile,
    tlsPrivateKeyFile: i.servingKeyFile,
    cgroupDriver: 'cgroupfs',
    failCgroupV1: false,
    failSwapOn: false,
    containerRuntimeEndpoint: `unix://${k.containerdSocket}`,
    podLogsDir: k.podLogsDir,
    clusterDomain: 'cluster.local',
    resolvConf: '/etc/resolv.conf',
    serializeImagePulls: false,
    // A shared development machine: never evict the test's Pods for disk or memory pressure.
    evictionHard: {
      'memory.available': '100Mi',
      'nodefs.available': '1%',
      'imagefs.available': '1%',
      'nodefs.inodesFree': '1%',
    },
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    nodeStatusReportFrequency: '10s',
    syncFrequency: '10s',
  });
}

export function kubeletArgs(k: KubeletLayout, node: string, kubeconfig: string): string[] {
  return [
    `--config=${k.kubeletConfig}`,
    `--kubeconfig=${kubeconfig}`,
    `--root-dir=${k.kubeletRoot}`,
    `--cert-dir=${k.kubeletCertDir}`,
    `--hostname-override=${node}`,
    '--v=1',
  ];
}

/** /etc/hosts with exactly one marked line mapping the node name to 127.0.0.1 (or none). */
export function hostsWithNode(hosts: string, node: string | undefined): string {
  const kept = hosts.split('\n').filter((l) => !l.includes(HOSTS_MARKER));
  while (kept.length > 0 && kept[kept.length - 1] === '') kept.pop();
  if (node) kept.push(`127.0.0.1 ${node} ${HOSTS_MARKER}`);
  return `${kept.join('\n')}\n`;
}
