/**
 * What the node agent does besides running Pods, for the kubelet node kind: the local-dir
 * volume provisioner (StorageClass kruntimes-local) and the `kubernetes` Service's ClusterIP.
 * The kubelet hands every container KUBERNETES_SERVICE_HOST=10.96.0.1; there is no kube-proxy
 * and the API server listens on 127.0.0.1 only, so 10.96.0.1 is a local address of this host
 * (added by `krt local up --node=kubelet`) where this process relays TCP, byte for byte (TLS
 * stays end to end), to the loopback API server.
 */
import { readFileSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import type { KubeClient } from '../lib/kube/client.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { pino } from 'pino';
import { clientFromKubeconfig } from '../lib/kube/config.ts';
import { LocalDirProvisioner } from '../nodeagent/provisioner.ts';

export interface NodeServicesConfig {
  serviceHost: string;
  servicePort: number;
  apiserverPort: number;
  provisioner: { kubeconfig: string; root: string };
  /**
   * The extension server runs on the Pod network (the namespace's `restricted` Pod Security
   * forbids hostNetwork) while the API server calls it on 127.0.0.1:<port> (ExternalName
   * localhost): relay that port to the ready extension Pod's IP, looked up with the
   * provisioner's identity (pods get/list only).
   */
  extension?: { port: number; namespace: string; labelSelector: string };
}

type Target = () => Promise<{ host: string; port: number } | undefined>;

/** Relays every connection to host:port on to target() (a fixed loopback port or a Pod). */
export function tcpRelay(host: string, port: number, target: number | Target): Promise<Server> {
  const resolve: Target =
    typeof target === 'number' ? () => Promise.resolve({ host: '127.0.0.1', port: target }) : target;
  const srv = createServer((inbound) => {
    inbound.pause();
    void resolve().then(
      (to) => (to ? pipeTo(inbound, to) : inbound.destroy()),
      () => inbound.destroy(),
    );
  });
  return new Promise((ok, reject) => {
    srv.once('error', reject);
    srv.listen(port, host, () => ok(srv));
  });
}

function pipeTo(inbound: Socket, to: { host: string; port: number }): void {
  const outbound = createConnection(to);
  inbound.pipe(outbound).pipe(inbound);
  const close = (): void => {
    inbound.destroy();
    outbound.destroy();
  };
  inbound.on('error', close);
  outbound.on('error', close);
  inbound.on('close', close);
  outbound.on('close', close);
  inbound.resume();
}

type PodLite = KubeObject & {
  metadata: { deletionTimestamp?: string };
  status?: { podIP?: string; conditions?: { type: string; status: string }[] };
};

/** The IP of a ready, not terminating Pod among pods (the newest first), if any. */
export function readyPodIP(pods: PodLite[]): string | undefined {
  const ready = pods.filter(
    (p) =>
      !p.metadata.deletionTimestamp &&
      p.status?.podIP &&
      p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
  );
  ready.sort((a, b) => (b.metadata.creationTimestamp ?? '').localeCompare(a.metadata.creationTimestamp ?? ''));
  return ready[0]?.status?.podIP;
}

function podTarget(api: KubeClient, ext: NonNullable<NodeServicesConfig['extension']>): Target {
  let cached: { ip: string; at: number } | undefined;
  return async () => {
    if (!cached || Date.now() - cached.at > 2000) {
      const list = await api.list<PodLite>(`/api/v1/namespaces/${ext.namespace}/pods`, {
        labelSelector: ext.labelSelector,
      });
      const ip = readyPodIP(list.items);
      cached = ip ? { ip, at: Date.now() } : undefined;
    }
    return cached ? { host: cached.ip, port: ext.port } : undefined;
  };
}

/** Starts the relay and the provisioner from the JSON config at path. */
export async function startNodeServices(path: string): Promise<void> {
  const cfg = JSON.parse(readFileSync(path, 'utf8')) as NodeServicesConfig;
  const log = pino({ base: { component: 'node-services' } });
  await tcpRelay(cfg.serviceHost, cfg.servicePort, cfg.apiserverPort);
  log.info({ from: `${cfg.serviceHost}:${cfg.servicePort}`, to: cfg.apiserverPort }, 'relaying the kubernetes Service');
  const api = clientFromKubeconfig(cfg.provisioner.kubeconfig, 'kruntimes-local-provisioner');
  if (cfg.extension) await tcpRelay('127.0.0.1', cfg.extension.port, podTarget(api, cfg.extension));
  new LocalDirProvisioner(api, cfg.provisioner.root, log.child({ component: 'local-provisioner' })).start();
}
