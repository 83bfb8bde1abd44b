/**
 * The embedded local environment: etcd, kube-apiserver, kube-controller-manager,
 * kube-scheduler (built from pinned upstream modules) and the TypeScript node agent, all on
 * loopback with generated PKI. State lives in one directory, so up is idempotent, down stops
 * what up started, and tests run their own instance in their own directory.
 */
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { get as httpsGet } from 'node:https';
import { join } from 'node:path';
import { createConnection } from 'node:net';
import { KubeClient } from '../lib/kube/client.ts';
import { kubeletArgs, kubeletLayout } from './kubelet-config.ts';
import { checkKubeletHost, cleanupKubeletHost, killPodProcesses, prepareKubeletHost } from './kubelet-node.ts';
import { importImages } from './kubelet-images.ts';
import { copySeed, ensureImageSeed } from './kubelet-image-seed.ts';
import type { NodeServicesConfig } from './node-services.ts';
import {
  apiserverArgs,
  etcdArgs,
  kcmArgs,
  layout,
  schedulerArgs,
  writeAdmissionConfig,
  type Layout,
  type Ports,
} from './components.ts';
import { pkiKubeconfig } from './kubeconfig.ts';
import { applyBootstrap } from './bootstrap.ts';
import { EXTENSION_SERVICE, installKruntimes, KRUNTIMES_NS } from './install.ts';
import { ensureClusterPki, FIRST_SERVICE_IP } from './pki.ts';
import { freePorts } from './ports.ts';
import { GiveUp, isAlive, spawnDetached, stopGroup, waitFor } from './process.ts';
import { buildBundle } from './bundle.ts';
import { REPO_ROOT } from './paths.ts';
import type { NodeAgentConfig } from '../nodeagent/config.ts';

export type Component =
  | 'etcd'
  | 'kube-apiserver'
  | 'kube-controller-manager'
  | 'kube-scheduler'
  | 'node-agent'
  | 'containerd'
  | 'kubelet'
  | 'node-services';
const CONTROL_PLANE: Component[] = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler'];
/** Which node runs the Pods: the TypeScript node agent (default) or a real kubelet + containerd. */
export type NodeKind = 'agent' | 'kubelet';
export const NODE_KINDS: NodeKind[] = ['agent', 'kubelet'];
export const COMPONENTS: Component[] = [...CONTROL_PLANE, 'node-agent'];
export const KUBELET_COMPONENTS: Component[] = [...CONTROL_PLANE, 'containerd', 'kubelet', 'node-services'];
export const componentsOf = (kind: NodeKind | undefined): Component[] =>
  kind === 'kubelet' ? KUBELET_COMPONENTS : COMPONENTS;

export interface EnvState {
  root: string;
  binDir: string;
  ports: Ports;
  nodes: string[];
  pids: Partial<Record<Component, number>>;
  /** Absent in state written before the kubelet kind existed: the node agent. */
  nodeKind?: NodeKind;
  /** The kubelet kind's binaries (scripts/build-kubelet.sh) and its healthz port. */
  kubelet?: { binDir: string; healthzPort: number };
}

export interface UpOptions {
  root: string;
  nodes?: string[];
  progress?: (msg: string) => void;
  /** Skip the control-plane build and use this directory of binaries. */
  binDir?: string;
  /** Install kruntimes from the local kustomize overlay (default true). */
  install?: boolean;
  /** The kustomize overlay to install, relative to the repository root (default kustomize/overlays/local). */
  overlay?: string;
  /** The node kind of a new environment (default: the node agent); an existing one keeps its own. */
  nodeKind?: NodeKind;
  /** Skip the kubelet kind's build and use this directory of binaries. */
  kubeletBinDir?: string;
}

export interface Env {
  state: EnvState;
  kubeconfig: string;
  server: string;
  admin: KubeClient;
}

const statePath = (root: string): string => join(root, 'state.json');

export function readState(root: string): EnvState | undefined {
  const p = statePath(root);
  return existsSync(p) ? (JSON.parse(readFileSync(p, 'utf8')) as EnvState) : undefined;
}

function writeState(s: EnvState): void {
  writeFileSync(statePath(s.root), JSON.stringify(s, null, 2));
}

/** Builds (or finds in the cache) the control-plane binaries; returns their directory. */
export function buildControlPlane(progress: (m: string) => void): Promise<string> {
  return runBuildScript('scripts/build-control-plane.sh', 'control-plane', progress);
}

/** Builds (or finds in the cache) kubelet, containerd and runc; returns their directory. */
export function buildKubeletNode(progress: (m: string) => void): Promise<string> {
  return runBuildScript('scripts/build-kubelet.sh', 'kubelet node', progress);
}

function runBuildScript(script: string, what: string, progress: (m: string) => void): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile('bash', [join(REPO_ROOT, script)], { maxBuffer: 1 << 24 }, (err, stdout) => {
      if (err) {
        reject(new Error(`${what} build failed: ${err.message}`));
        return;
      }
      resolve(stdout.trim().split('\n').pop() ?? '');
    });
    child.stderr?.on('data', (d: Buffer) => {
      for (const l of d.toString().split('\n')) if (l.trim()) progress(l.trim());
    });
  });
}

export function adminClient(l: Layout, ports: Ports): KubeClient {
  return new KubeClient({
    server: `https://127.0.0.1:${ports.apiserver}`,
    ca: readFileSync(join(l.pki, 'ca.crt')),
    cert: readFileSync(join(l.pki, 'admin.crt')),
    key: readFileSync(join(l.pki, 'admin.key')),
    userAgent: 'kruntimes-local',
  });
}

async function initialState(opts: UpOptions, binDir: string): Promise<EnvState> {
  const old = readState(opts.root);
  if (old) return { ...old, binDir };
  const nodeKind = opts.nodeKind ?? 'agent';
  // One real kubelet per machine: the kubelet kind has exactly one node.
  const nodes =
    nodeKind === 'kubelet' ? (opts.nodes ?? ['kruntimes-node-1']).slice(0, 1) : (opts.nodes ?? ['kruntimes-node-1']);
  const [etcdClient, etcdPeer, apiserver, kcm, scheduler, ...nodePorts] = await freePorts(5 + nodes.length);
  const ports: Ports = {
    etcdClient: etcdClient!,
    etcdPeer: etcdPeer!,
    apiserver: apiserver!,
    kcm: kcm!,
    scheduler: scheduler!,
    nodes: nodePorts,
  };
  return { root: opts.root, binDir, ports, nodes, pids: {}, nodeKind };
}

function writeKubeconfigs(l: Layout, s: EnvState): string {
  const server = `https://127.0.0.1:${s.ports.apiserver}`;
  pkiKubeconfig(l.root, l.pki, server, 'kcm', 'system:kube-controller-manager');
  pkiKubeconfig(l.root, l.pki, server, 'scheduler', 'system:kube-scheduler');
  for (const n of s.nodes) pkiKubeconfig(l.root, l.pki, server, `node-${n}`, `system:node:${n}`);
  pkiKubeconfig(l.root, l.pki, server, 'local-provisioner', 'system:kruntimes:local-provisioner');
  writeAdmissionConfig(l, s.ports.extension);
  const admin = pkiKubeconfig(l.root, l.pki, server, 'admin', 'kruntimes-admin');
  writeFileSync(join(l.root, 'kubeconfig'), readFileSync(admin), { mode: 0o600 });
  return join(l.root, 'kubeconfig');
}

function nodeAgentConfig(l: Layout, s: EnvState): string {
  const cfg: NodeAgentConfig = {
    stateDir: join(l.root, 'nodes'),
    apiserverHost: '127.0.0.1',
    apiserverPort: s.ports.apiserver,
    clientCaFile: join(l.pki, 'ca.crt'),
    clusterCaFile: join(l.pki, 'ca.crt'),
    provisioner: { kubeconfig: join(l.root, 'local-provisioner.kubeconfig'), root: join(l.root, 'volumes') },
    nodes: s.nodes.map((name, i) => ({
      name,
      port: s.ports.nodes[i] ?? 0,
      kubeconfig: join(l.root, `node-${name}.kubeconfig`),
      servingCertFile: join(l.pki, `node-${name}-serving.crt`),
      servingKeyFile: join(l.pki, `node-${name}-serving.key`),
    })),
  };
  const p = join(l.root, 'nodeagent.json');
  writeFileSync(p, JSON.stringify(cfg, null, 2));
  return p;
}

function httpOk(url: string): Promise<boolean> {
  return new Promise((resolve) => {
    const getter = url.startsWith('https') ? httpsGet : httpGet;
    const req = getter(url, { rejectUnauthorized: false, timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => {
      req.destroy();
      resolve(false);
    });
  });
}

interface StartSpec {
  component: Component;
  command: string;
  args: string[];
  health: () => Promise<boolean>;
  timeoutMs: number;
  env?: NodeJS.ProcessEnv;
}

async function ensureRunning(s: EnvState, l: Layout, spec: StartSpec, progress: (m: string) => void): Promise<void> {
  const pid = s.pids[spec.component];
  if (isAlive(pid) && (await spec.health().catch(() => false))) return;
  if (isAlive(pid)) await stopGroup(pid);
  progress(`starting ${spec.component}`);
  s.pids[spec.component] = spawnDetached({
    name: spec.component,
    command: spec.command,
    args: spec.args,
    logFile: join(l.logs, `${spec.component}.log`),
    cwd: REPO_ROOT,
    ...(spec.env ? { env: spec.env } : {}),
  });
  writeState(s);
  await waitFor(
    `${spec.component} to become healthy (log: ${join(l.logs, `${spec.component}.log`)})`,
    async () => {
      if (!isAlive(s.pids[spec.component]))
        throw new GiveUp(`${spec.component} exited; see ${join(l.logs, `${spec.component}.log`)}`);
      return spec.health();
    },
    spec.timeoutMs,
    progress,
  ).catch((err: Error) => {
    throw new Error(`${err.message}\n${tail(join(l.logs, `${spec.component}.log`))}`);
  });
}

function tail(file: string, lines = 15): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

async function readyz(admin: KubeClient): Promise<boolean> {
  const body = await admin.request<string>('GET', '/readyz', { accept: 'text/plain', timeoutMs: 3000 });
  return body.trim() === 'ok';
}

async function nodesReady(admin: KubeClient, nodes: string[]): Promise<boolean> {
  for (const n of nodes) {
    const node = await admin.get<{ metadata: object; status?: { conditions?: { type: string; status: string }[] } }>(
      `/api/v1/nodes/${n}`,
    );
    if (!node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) return false;
  }
  return true;
}

/** The local environment's components in start order, each with its health check. */
function componentSpecs(s: EnvState, l: Layout, binDir: string, admin: KubeClient): StartSpec[] {
  const control = controlPlaneSpecs(s, l, binDir, admin);
  if (s.nodeKind === 'kubelet') return [...control, ...kubeletSpecs(s, l, admin)];
  return [
    ...control,
    {
      component: 'node-agent',
      command: process.execPath,
      args: ['--import', 'tsx', join(REPO_ROOT, 'nodeagent/main.ts'), nodeAgentConfig(l, s)],
      timeoutMs: 60_000,
      health: () => nodesReady(admin, s.nodes),
    },
  ];
}

/** containerd, the kubelet and node-services (provisioner, kubernetes Service relay). */
function kubeletSpecs(s: EnvState, l: Layout, admin: KubeClient): StartSpec[] {
  const k = kubeletLayout(l.root);
  const binDir = s.kubelet?.binDir ?? '';
  const node = s.nodes[0] ?? '';
  return [
    {
      component: 'containerd',
      command: join(binDir, 'containerd'),
      args: ['--config', k.containerdConfig, '--log-level', 'warn'],
      env: { ...process.env, PATH: `${binDir}:${process.env.PATH ?? ''}` },
      timeoutMs: 60_000,
      health: () => commandOk(join(binDir, 'ctr'), ['--address', k.containerdSocket, 'version']),
    },
    {
      component: 'kubelet',
      command: join(binDir, 'kubelet'),
      args: kubeletArgs(k, node, join(l.root, `node-${node}.kubeconfig`)),
      env: { ...process.env, PATH: `${binDir}:${process.env.PATH ?? ''}` },
      timeoutMs: 120_000,
      health: () => nodesReady(admin, s.nodes),
    },
    {
      component: 'node-services',
      command: process.execPath,
      args: ['--import', 'tsx', join(REPO_ROOT, 'localenv/node-services-main.ts'), nodeServicesConfig(l, s)],
      timeoutMs: 60_000,
      health: () => tcpOk(FIRST_SERVICE_IP, 443),
    },
  ];
}

function nodeServicesConfig(l: Layout, s: EnvState): string {
  const cfg: NodeServicesConfig = {
    serviceHost: FIRST_SERVICE_IP,
    servicePort: 443,
    apiserverPort: s.ports.apiserver,
    provisioner: { kubeconfig: join(l.root, 'local-provisioner.kubeconfig'), root: join(l.root, 'volumes') },
    ...(s.ports.extension
      ? {
          extension: {
            port: s.ports.extension,
            namespace: KRUNTIMES_NS,
            labelSelector: `app.kubernetes.io/name=${EXTENSION_SERVICE}`,
          },
        }
      : {}),
  };
  const p = join(l.root, 'node-services.json');
  writeFileSync(p, JSON.stringify(cfg, null, 2));
  return p;
}

function commandOk(cmd: string, args: string[]): Promise<boolean> {
  return new Promise((resolve) => {
    execFile(cmd, args, { timeout: 5000 }, (err) => resolve(!err));
  });
}

function tcpOk(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = createConnection({ host, port, timeout: 2000 }, () => {
      sock.destroy();
      resolve(true);
    });
    sock.on('error', () => resolve(false));
    sock.on('timeout', () => {
      sock.destroy();
      resolve(false);
    });
  });
}

function controlPlaneSpecs(s: EnvState, l: Layout, binDir: string, admin: KubeClient): StartSpec[] {
  const bin = (c: string): string => join(binDir, c);
  const https =
    (port: number | undefined): (() => Promise<boolean>) =>
    () =>
      httpOk(`https://127.0.0.1:${port}/healthz`);
  return [
    {
      component: 'etcd',
      command: bin('etcd'),
      args: etcdArgs(l, s.ports),
      timeoutMs: 30_000,
      health: () => httpOk(`http://127.0.0.1:${s.ports.etcdClient}/health`),
    },
    {
      component: 'kube-apiserver',
      command: bin('kube-apiserver'),
      args: apiserverArgs(l, s.ports, s.nodeKind),
      timeoutMs: 120_000,
      health: () => readyz(admin),
    },
    {
      component: 'kube-controller-manager',
      command: bin('kube-controller-manager'),
      args: kcmArgs(l, s.ports),
      timeoutMs: 60_000,
      health: https(s.ports.kcm),
    },
    {
      component: 'kube-scheduler',
      command: bin('kube-scheduler'),
      args: schedulerArgs(l, s.ports),
      timeoutMs: 60_000,
      health: https(s.ports.scheduler),
    },
  ];
}

/** The kubelet kind's binaries, ports and host preparation (before containerd starts). */
async function prepareKubeletKind(
  s: EnvState,
  l: Layout,
  opts: UpOptions,
  progress: (m: string) => void,
): Promise<void> {
  const binDir = opts.kubeletBinDir ?? s.kubelet?.binDir ?? (await buildKubeletNode(progress));
  checkKubeletHost(binDir);
  s.kubelet = { binDir, healthzPort: s.kubelet?.healthzPort ?? (await freePorts(1))[0]! };
  const node = s.nodes[0] ?? '';
  const k = kubeletLayout(l.root);
  // A new environment's containerd starts from the image seed (its cached layers, unpacked).
  if (!existsSync(k.containerdRoot)) {
    const seed = await ensureImageSeed(binDir, progress);
    progress('copying the containerd image seed');
    copySeed(seed, k.containerdRoot);
  }
  prepareKubeletHost(k, binDir, node, {
    port: s.ports.nodes[0] ?? 0,
    healthzPort: s.kubelet.healthzPort,
    clientCaFile: join(l.pki, 'ca.crt'),
    servingCertFile: join(l.pki, `node-${node}-serving.crt`),
    servingKeyFile: join(l.pki, `node-${node}-serving.key`),
  });
}

export async function up(opts: UpOptions): Promise<Env> {
  const progress = opts.progress ?? ((): void => undefined);
  const binDir = opts.binDir ?? (await buildControlPlane(progress));
  const l = layout(opts.root);
  mkdirSync(l.logs, { recursive: true });
  progress('bundling the per-Pod components');
  await buildBundle();
  // The environment's keys, etcd data, node and volume directories are the host's, as
  // /etc/kubernetes and /var/lib/kubelet are on a node: containers running as non-root users
  // see their volumes through their mounts only, never these paths.
  chmodSync(opts.root, 0o700);
  const s = await initialState(opts, binDir);
  const before = { ...s.pids };
  try {
    return await startAll(s, l, opts, binDir, progress);
  } catch (err) {
    // A failed start stops what this call started (not what it found running), as down() would.
    progress('start failed: stopping the components this start started');
    await stopStarted(s, before);
    throw err;
  }
}

async function startAll(
  s: EnvState,
  l: Layout,
  opts: UpOptions,
  binDir: string,
  progress: (m: string) => void,
): Promise<Env> {
  progress('generating PKI and kubeconfigs');
  ensureClusterPki(l.pki, s.nodes);
  // Allocated before the API server starts: its webhook client configuration names the port.
  if (opts.install !== false && !s.ports.extension) s.ports.extension = (await freePorts(1))[0];
  const kubeconfig = writeKubeconfigs(l, s);
  if (s.nodeKind === 'kubelet') await prepareKubeletKind(s, l, opts, progress);
  writeState(s);
  const admin = adminClient(l, s.ports);
  for (const spec of componentSpecs(s, l, binDir, admin)) {
    await ensureRunning(s, l, spec, progress);
    if (spec.component === 'kube-apiserver') await applyBootstrap(admin, s.nodeKind);
    if (spec.component === 'containerd')
      await importImages(
        join(s.kubelet!.binDir, 'ctr'),
        kubeletLayout(l.root).containerdSocket,
        kubeletLayout(l.root).containerdRoot,
        progress,
      );
  }
  await waitFor(
    'the default ServiceAccount',
    async () => {
      await admin.get('/api/v1/namespaces/default/serviceaccounts/default');
      return true;
    },
    60_000,
    progress,
  );
  if (opts.install !== false) {
    await installKruntimes({
      kubectl: join(binDir, 'kubectl'),
      kubeconfig,
      api: admin,
      port: s.ports.extension!,
      progress,
      ...(opts.overlay ? { overlay: opts.overlay } : {}),
      ...(s.nodeKind === 'kubelet' ? { nodeKind: 'kubelet' as const } : {}),
    });
  }
  return { state: s, kubeconfig, server: `https://127.0.0.1:${s.ports.apiserver}`, admin };
}

/** The order down() stops the control plane in (the node agent first: it stops its Pods' processes). */
const DOWN_ORDER: Component[] = ['node-agent', 'kube-scheduler', 'kube-controller-manager', 'kube-apiserver', 'etcd'];
const downGraceMs = (c: Component): number => (c === 'node-agent' ? 40_000 : 10_000);

/** The components `up` started itself: their pid is new since it began. */
export function startedSince(
  before: Partial<Record<Component, number>>,
  now: Partial<Record<Component, number>>,
): Component[] {
  return (Object.keys(now) as Component[]).filter((c) => now[c] !== undefined && now[c] !== before[c]);
}

/** After a failed up(): stops, in down()'s order, what it started; components it found running stay. */
async function stopStarted(s: EnvState, before: Partial<Record<Component, number>>): Promise<void> {
  const started = new Set(startedSince(before, s.pids));
  const kubeletParts: Component[] = ['node-services', 'kubelet', 'containerd'];
  if (s.nodeKind === 'kubelet' && kubeletParts.some((c) => started.has(c))) await downKubeletNode(s);
  for (const c of DOWN_ORDER) if (started.has(c)) await stopGroup(s.pids[c], downGraceMs(c));
  for (const c of started) delete s.pids[c];
  writeState(s);
}

/**
 * Starts one component of a running environment again if its process is gone (nothing else
 * supervises the local environment's processes; `up` does the same for all of them). A live
 * process is left alone, healthy or not. Returns whether it was started.
 */
export async function restartComponent(
  root: string,
  component: Component,
  progress: (m: string) => void = () => undefined,
): Promise<boolean> {
  const s = readState(root);
  if (!s) throw new Error(`no local environment in ${root}`);
  if (isAlive(s.pids[component])) return false;
  const l = layout(root);
  const admin = adminClient(l, s.ports);
  try {
    const spec = componentSpecs(s, l, s.binDir, admin).find((x) => x.component === component);
    if (!spec) throw new Error(`${component} is not a component of the environment in ${root}`);
    await ensureRunning(s, l, spec, progress);
    return true;
  } finally {
    admin.close();
  }
}

/** Stops the kubelet kind's node: Pods' processes outlive the kubelet and containerd. */
async function downKubeletNode(s: EnvState): Promise<void> {
  await stopGroup(s.pids['node-services']);
  await stopGroup(s.pids.kubelet, 20_000);
  killPodProcesses();
  await stopGroup(s.pids.containerd, 20_000);
  cleanupKubeletHost(kubeletLayout(s.root));
}

export async function down(root: string, opts: { purge?: boolean } = {}): Promise<void> {
  const s = readState(root);
  if (s) {
    if (s.nodeKind === 'kubelet') await downKubeletNode(s);
    for (const c of DOWN_ORDER) await stopGroup(s.pids[c], downGraceMs(c));
    s.pids = {};
    writeState(s);
  }
  if (opts.purge) rmSync(root, { recursive: true, force: true });
}

export interface ComponentStatus {
  component: Component;
  pid?: number;
  running: boolean;
}

export function status(root: string): { state?: EnvState; components: ComponentStatus[] } {
  const s = readState(root);
  const components = componentsOf(s?.nodeKind).map((c) => ({
    component: c,
    pid: s?.pids[c],
    running: isAlive(s?.pids[c]),
  }));
  return { ...(s ? { state: s } : {}), components };
}

export async function apiHealthy(root: string): Promise<boolean> {
  const s = readState(root);
  if (!s) return false;
  return readyz(adminClient(layout(root), s.ports)).catch(() => false);
}
