/** Configuration of the node agent: one process can serve several Nodes. */
import { readFileSync } from 'node:fs';

export interface NodeConfig {
  name: string;
  /** Port of the HTTPS server the API server calls for /containerLogs. */
  port: number;
  /** Kubeconfig with the node's identity (CN=system:node:<name>, O=system:nodes). */
  kubeconfig: string;
  servingCertFile: string;
  servingKeyFile: string;
}

export interface NodeAgentConfig {
  stateDir: string;
  /** What Pods see as KUBERNETES_SERVICE_HOST/PORT: the loopback API server, never a ClusterIP. */
  apiserverHost: string;
  apiserverPort: number;
  /** CA that signs the API server's kubelet client certificate (mTLS on the log server). */
  clientCaFile: string;
  /** CA of the cluster, published into service-account token volumes as ca.crt. */
  clusterCaFile: string;
  nodes: NodeConfig[];
  /** Run the local-dir volume provisioner with this identity, storing volumes under root. */
  provisioner?: { kubeconfig: string; root: string };
}

export function loadConfig(path: string): NodeAgentConfig {
  const cfg = JSON.parse(readFileSync(path, 'utf8')) as NodeAgentConfig;
  if (!Array.isArray(cfg.nodes) || cfg.nodes.length === 0)
    throw new Error(`${path}: nodes must list at least one node`);
  for (const [i, n] of cfg.nodes.entries()) {
    if (!n.name || !n.kubeconfig) throw new Error(`${path}: nodes[${i}] needs name and kubeconfig`);
  }
  return cfg;
}
