/**
 * What the node agent does besides running Pods, for the kubelet node kind: the local-dir
 * volume provisioner (StorageClass kruntimes-local) and the `kubernetes` Service's ClusterIP.
 * The kubelet hands every container KUBERNETES_SERVICE_HOST=10.96.0.1; there is no kube-proxy
 * and the API server listens on 127.0.0.1 only, so 10.96.0.1 is a local address of this host
 * (added by `krt local up --node=kubelet`) where this process relays TCP, byte for byte (TLS
 * stays end to end), to the loopback API server.
 */
import { readFileSync } from 'node:fs';
import { createConnection, createServer, type Server } from 'node:net';
import { pino } from 'pino';
import { clientFromKubeconfig } from '../lib/kube/config.ts';
import { LocalDirProvisioner } from '../nodeagent/provisioner.ts';

export interface NodeServicesConfig {
  serviceHost: string;
  servicePort: number;
  apiserverPort: number;
  provisioner: { kubeconfig: string; root: string };
}

/** Relays every connection to host:port on 127.0.0.1:target. */
export function tcpRelay(host: string, port: number, target: number): Promise<Server> {
  const srv = createServer((inbound) => {
    const outbound = createConnection({ host: '127.0.0.1', port: target });
    inbound.pipe(outbound).pipe(inbound);
    const close = (): void => {
      inbound.destroy();
      outbound.destroy();
    };
    inbound.on('error', close);
    outbound.on('error', close);
    inbound.on('close', close);
    outbound.on('close', close);
  });
  return new Promise((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(port, host, () => resolve(srv));
  });
}

/** Starts the relay and the provisioner from the JSON config at path. */
export async function startNodeServices(path: string): Promise<void> {
  const cfg = JSON.parse(readFileSync(path, 'utf8')) as NodeServicesConfig;
  const log = pino({ base: { component: 'node-services' } });
  await tcpRelay(cfg.serviceHost, cfg.servicePort, cfg.apiserverPort);
  log.info({ from: `${cfg.serviceHost}:${cfg.servicePort}`, to: cfg.apiserverPort }, 'relaying the kubernetes Service');
  new LocalDirProvisioner(
    clientFromKubeconfig(cfg.provisioner.kubeconfig, 'kruntimes-local-provisioner'),
    cfg.provisioner.root,
    log.child({ component: 'local-provisioner' }),
  ).start();
}
