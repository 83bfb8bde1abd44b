/**
 * The kubelet node kind: host preparation before containerd and the kubelet start, and the
 * cleanup after they stopped. Everything upstream lets us move lives under the environment's
 * root; what it does not (the node name in /etc/hosts, the Service IP on lo, the CNI bridge,
 * /var/log/containers links, /run/containerd/s shim sockets, kubepods cgroups) is removed on
 * `down`. One kubelet node per machine.
 */
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import {
  CNI_BIN_DIR,
  CNI_BRIDGE,
  CNI_NETWORK,
  cniConfig,
  containerdConfig,
  hostsWithNode,
  kubeletConfig,
  type KubeletConfigInput,
  type KubeletLayout,
} from './kubelet-config.ts';
import { FIRST_SERVICE_IP } from './pki.ts';

const HOSTS = '/etc/hosts';
const CONTAINER_LOGS = '/var/log/containers';
const SHIM_SOCKETS = '/run/containerd/s';
const CGROUP_ROOT = '/sys/fs/cgroup';
const CNI_RESULTS = '/var/lib/cni/cache/results';

function ip(args: string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

function tryIp(args: string[]): void {
  try {
    ip(args);
  } catch {
    /* already absent */
  }
}

/** Refuses early, with what to run, when the kind's host tools are missing. */
export function checkKubeletHost(binDir: string): void {
  const missing = [
    ...['kubelet', 'containerd', 'containerd-shim-runc-v2', 'runc', 'ctr'].map((b) => join(binDir, b)),
    ...['bridge', 'host-local', 'portmap'].map((p) => join(CNI_BIN_DIR, p)),
  ].filter((p) => !existsSync(p));
  if (missing.length > 0)
    throw new Error(
      `the kubelet node kind needs ${missing.join(', ')}; run: bash scripts/setup.sh --kubelet ` +
        '(apt packages) and bash scripts/build-kubelet.sh (binaries)',
    );
  if (process.getuid?.() !== 0) throw new Error('the kubelet node kind needs root (containerd, runc, CNI)');
}

export function prepareKubeletHost(k: KubeletLayout, binDir: string, node: string, cfg: KubeletConfigInput): void {
  for (const d of [k.containerdRoot, k.containerdState, k.cniConfDir, k.cniDataDir, k.kubeletCertDir, k.podLogsDir])
    mkdirSync(d, { recursive: true });
  writeFileSync(k.containerdConfig, containerdConfig(k, binDir));
  writeFileSync(join(k.cniConfDir, `10-${CNI_NETWORK}.conflist`), cniConfig(k));
  writeFileSync(k.kubeletConfig, kubeletConfig(k, cfg));
  // The API server reaches the loopback kubelet by the node's Hostname address.
  writeFileSync(HOSTS, hostsWithNode(readFileSync(HOSTS, 'utf8'), node));
  // The `kubernetes` Service's ClusterIP as a local address, relayed by node-services.
  ip(['addr', 'replace', `${FIRST_SERVICE_IP}/32`, 'dev', 'lo']);
}

/** Every process in the kubelet's Pod cgroups, killed (containers outlive kubelet and containerd). */
export function killPodProcesses(): number {
  let killed = 0;
  for (const file of podCgroupFiles('cgroup.procs')) {
    const pids = readFileSync(file, 'utf8').split('\n').filter(Boolean).map(Number);
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
        killed++;
      } catch {
        /* gone */
      }
    }
  }
  return killed;
}

/** Shims started by this environment's containerd (they run in their own sessions). */
export function killShims(k: KubeletLayout): void {
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    let cmd = '';
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (!cmd.includes('containerd-shim') || !cmd.includes(k.containerdSocket)) continue;
    try {
      process.kill(Number(pid), 'SIGKILL');
    } catch {
      /* gone */
    }
  }
}

function podCgroupDirs(): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    out.push(dir);
    for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) walk(join(dir, e.name));
  };
  if (!existsSync(CGROUP_ROOT)) return out;
  for (const ctrl of readdirSync(CGROUP_ROOT)) {
    const kubepods = join(CGROUP_ROOT, ctrl, 'kubepods');
    if (existsSync(kubepods)) walk(kubepods);
  }
  return out;
}

function podCgroupFiles(name: string): string[] {
  return podCgroupDirs()
    .map((d) => join(d, name))
    .filter((f) => existsSync(f));
}

/** Mount points under dir, deepest first (overlay snapshots, netns, projected token tmpfs). */
export function mountsUnder(mountinfo: string, dir: string): string[] {
  const points = mountinfo
    .split('\n')
    .map((l) => l.split(' ')[4] ?? '')
    .map((p) => p.replace(/\\040/g, ' '))
    .filter((p) => p === dir || p.startsWith(`${dir}/`));
  return [...new Set(points)].sort((a, b) => b.length - a.length);
}

/** Unmounts every mount point under dir (lazily, deepest first). */
export function unmountAll(dir: string): void {
  for (let pass = 0; pass < 3; pass++) {
    const points = mountsUnder(readFileSync('/proc/self/mountinfo', 'utf8'), dir);
    if (points.length === 0) return;
    for (const p of points) {
      try {
        execFileSync('umount', ['-l', p], { stdio: 'ignore' });
      } catch {
        /* raced with another unmount */
      }
    }
  }
}

function removeContainerLogLinks(k: KubeletLayout): void {
  if (!existsSync(CONTAINER_LOGS)) return;
  for (const f of readdirSync(CONTAINER_LOGS)) {
    const p = join(CONTAINER_LOGS, f);
    try {
      if (readlinkSync(p).startsWith(`${k.podLogsDir}/`)) rmSync(p, { force: true });
    } catch {
      /* not a link */
    }
  }
}

/** The CNI cache libcni keeps outside any configurable directory: this network's entries only. */
function removeCniResults(): void {
  if (!existsSync(CNI_RESULTS)) return;
  for (const f of readdirSync(CNI_RESULTS))
    if (f.startsWith(`${CNI_NETWORK}-`)) rmSync(join(CNI_RESULTS, f), { force: true });
}

function removePodCgroups(): void {
  for (const d of podCgroupDirs().sort((a, b) => b.length - a.length)) {
    try {
      rmdirSync(d);
    } catch {
      /* busy or gone */
    }
  }
}

/** Undoes prepareKubeletHost and what containerd, CNI and the kubelet left outside the root. */
export function cleanupKubeletHost(k: KubeletLayout): void {
  killPodProcesses();
  killShims(k);
  unmountAll(k.root);
  removeContainerLogLinks(k);
  removePodCgroups();
  rmSync(SHIM_SOCKETS, { recursive: true, force: true });
  try {
    rmdirSync(dirname(SHIM_SOCKETS));
  } catch {
    /* not empty: something else's */
  }
  removeCniResults();
  tryIp(['link', 'del', CNI_BRIDGE]);
  tryIp(['addr', 'del', `${FIRST_SERVICE_IP}/32`, 'dev', 'lo']);
  writeFileSync(HOSTS, hostsWithNode(readFileSync(HOSTS, 'utf8'), undefined));
}
