/** Command lines of the upstream control-plane components for the loopback environment. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { SERVICE_CIDR } from './pki.ts';

export interface Ports {
  etcdClient: number;
  etcdPeer: number;
  apiserver: number;
  kcm: number;
  scheduler: number;
  /** One serving port per node agent node, in node order. */
  nodes: number[];
  /** Loopback port of the kruntimes extension API server (webhooks, aggregated APIs). */
  extension?: number;
}

export interface Layout {
  root: string;
  pki: string;
  logs: string;
}

export function layout(root: string): Layout {
  return { root, pki: join(root, 'pki'), logs: join(root, 'logs') };
}

/** The API server's admission configuration: webhooks to kruntimes present a client certificate. */
export const ADMISSION_CONFIG = 'admission-config.yaml';
/** The DNS name the API server uses for the extension server's webhooks (service reference, port 443). */
export const EXTENSION_WEBHOOK_HOST = 'kruntimes-extension.kruntimes-system.svc';

/**
 * Writes the AdmissionConfiguration and the webhook kubeconfig: the API server calls the
 * extension server's admission webhooks with the front-proxy client certificate, which the
 * extension server requires (it already trusts that CA and name for aggregated requests).
 */
export function writeAdmissionConfig(l: Layout, extensionPort: number | undefined): string {
  const kubeconfig = join(l.root, 'admission-webhooks.kubeconfig');
  const user = {
    'client-certificate': join(l.pki, 'front-proxy-client.crt'),
    'client-key': join(l.pki, 'front-proxy-client.key'),
  };
  // The API server looks the webhook up as <svc>.<ns>.svc:<port> (the port omitted when 443).
  const names = [EXTENSION_WEBHOOK_HOST, ...(extensionPort ? [`${EXTENSION_WEBHOOK_HOST}:${extensionPort}`] : [])];
  writeFileSync(
    kubeconfig,
    stringify({ apiVersion: 'v1', kind: 'Config', users: names.map((name) => ({ name, user })) }),
    { mode: 0o600 },
  );
  const webhook = {
    apiVersion: 'apiserver.config.k8s.io/v1',
    kind: 'WebhookAdmissionConfiguration',
    kubeConfigFile: kubeconfig,
  };
  const path = join(l.root, ADMISSION_CONFIG);
  writeFileSync(
    path,
    stringify({
      apiVersion: 'apiserver.config.k8s.io/v1',
      kind: 'AdmissionConfiguration',
      plugins: [
        { name: 'ValidatingAdmissionWebhook', configuration: webhook },
        { name: 'MutatingAdmissionWebhook', configuration: webhook },
      ],
    }),
    { mode: 0o600 },
  );
  return path;
}

export function etcdArgs(l: Layout, p: Ports): string[] {
  const client = `http://127.0.0.1:${p.etcdClient}`;
  const peer = `http://127.0.0.1:${p.etcdPeer}`;
  return [
    '--name=default',
    `--data-dir=${join(l.root, 'etcd')}`,
    `--listen-client-urls=${client}`,
    `--advertise-client-urls=${client}`,
    `--listen-peer-urls=${peer}`,
    `--initial-advertise-peer-urls=${peer}`,
    `--initial-cluster=default=${peer}`,
    '--unsafe-no-fsync=true',
    '--quota-backend-bytes=8589934592',
    '--auto-compaction-retention=1',
    '--log-level=warn',
  ];
}

/**
 * The node agent reports InternalIP 127.0.0.1. A kubelet refuses a loopback node IP, so it
 * reports the host's address while serving on 127.0.0.1 only: the API server dials its
 * Hostname (the node name, which the kubelet kind maps to 127.0.0.1 in /etc/hosts).
 */
export function kubeletAddressTypes(kind: 'agent' | 'kubelet' | undefined): string {
  return kind === 'kubelet' ? 'Hostname,InternalIP' : 'InternalIP';
}

export function apiserverArgs(l: Layout, p: Ports, kind?: 'agent' | 'kubelet'): string[] {
  const k = (f: string): string => join(l.pki, f);
  return [
    `--etcd-servers=http://127.0.0.1:${p.etcdClient}`,
    '--bind-address=127.0.0.1',
    `--secure-port=${p.apiserver}`,
    '--advertise-address=127.0.0.1',
    '--endpoint-reconciler-type=none',
    `--service-cluster-ip-range=${SERVICE_CIDR}`,
    `--tls-cert-file=${k('apiserver.crt')}`,
    `--tls-private-key-file=${k('apiserver.key')}`,
    `--cert-dir=${join(l.root, 'certs')}`,
    `--client-ca-file=${k('ca.crt')}`,
    '--authorization-mode=Node,RBAC',
    '--enable-admission-plugins=NodeRestriction',
    `--admission-control-config-file=${join(l.root, ADMISSION_CONFIG)}`,
    '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
    `--service-account-key-file=${k('sa.pub')}`,
    `--service-account-signing-key-file=${k('sa.key')}`,
    `--requestheader-client-ca-file=${k('front-proxy-ca.crt')}`,
    '--requestheader-allowed-names=front-proxy-client',
    '--requestheader-username-headers=X-Remote-User',
    '--requestheader-group-headers=X-Remote-Group',
    '--requestheader-uid-headers=X-Remote-Uid',
    '--requestheader-extra-headers-prefix=X-Remote-Extra-',
    `--proxy-client-cert-file=${k('front-proxy-client.crt')}`,
    `--proxy-client-key-file=${k('front-proxy-client.key')}`,
    '--enable-aggregator-routing=false',
    `--kubelet-client-certificate=${k('apiserver-kubelet-client.crt')}`,
    `--kubelet-client-key=${k('apiserver-kubelet-client.key')}`,
    `--kubelet-preferred-address-types=${kubeletAddressTypes(kind)}`,
    '--allow-privileged=true',
    '--v=1',
  ];
}

const DISABLED_CONTROLLERS = [
  'node-ipam-controller',
  'persistentvolume-attach-detach-controller',
  'node-route-controller',
  'service-lb-controller',
  'cloud-node-lifecycle-controller',
];

export function kcmArgs(l: Layout, p: Ports): string[] {
  const kc = join(l.root, 'kcm.kubeconfig');
  return [
    `--kubeconfig=${kc}`,
    `--authentication-kubeconfig=${kc}`,
    `--authorization-kubeconfig=${kc}`,
    '--bind-address=127.0.0.1',
    `--secure-port=${p.kcm}`,
    '--leader-elect=false',
    '--use-service-account-credentials=true',
    `--service-account-private-key-file=${join(l.pki, 'sa.key')}`,
    `--root-ca-file=${join(l.pki, 'ca.crt')}`,
    `--cluster-signing-cert-file=${join(l.pki, 'ca.crt')}`,
    `--cluster-signing-key-file=${join(l.pki, 'ca.key')}`,
    `--service-cluster-ip-range=${SERVICE_CIDR}`,
    `--controllers=*,${DISABLED_CONTROLLERS.map((c) => `-${c}`).join(',')}`,
    '--concurrent-job-syncs=10',
    '--kube-api-qps=200',
    '--kube-api-burst=400',
    '--v=1',
  ];
}

export function schedulerArgs(l: Layout, p: Ports): string[] {
  const kc = join(l.root, 'scheduler.kubeconfig');
  return [
    `--kubeconfig=${kc}`,
    `--authentication-kubeconfig=${kc}`,
    `--authorization-kubeconfig=${kc}`,
    '--bind-address=127.0.0.1',
    `--secure-port=${p.scheduler}`,
    '--leader-elect=false',
    '--v=1',
  ];
}
