/** The e2e suite's own control plane: one per test run, in its own directory and ports. */
import { join } from 'node:path';
import { down, NODE_KINDS, up, type Env, type NodeKind } from '../localenv/environment.ts';
import { POD_GATEWAY } from '../localenv/kubelet-config.ts';
import { REPO_ROOT } from '../localenv/paths.ts';

let current: Env | undefined;
export const E2E_ROOT = join(REPO_ROOT, '.kruntimes', 'e2e', String(process.pid));
/**
 * The node kind the suite runs on: KRT_NODE_KIND=kubelet for a real kubelet + containerd + runc
 * (one node, e2e-node-a; `make test-kubelet`, docs/kubelet-node.md), else the node agent.
 */
export const E2E_NODE_KIND: NodeKind = NODE_KINDS.includes(process.env.KRT_NODE_KIND as NodeKind)
  ? (process.env.KRT_NODE_KIND as NodeKind)
  : 'agent';
export const E2E_NODES = E2E_NODE_KIND === 'kubelet' ? ['e2e-node-a'] : ['e2e-node-a', 'e2e-node-b'];
/**
 * Where a Pod reaches a server the suite runs on the host: the loopback on the node agent (Pods
 * share the host's network), the CNI bridge's gateway on a real kubelet (127.0.0.1 is the Pod).
 */
export const E2E_HOST_ADDRESS = E2E_NODE_KIND === 'kubelet' ? POD_GATEWAY : '127.0.0.1';
/** The local overlay plus the sample functions the functions e2e exercises (test fixtures only). */
export const E2E_OVERLAY = 'e2e/fixtures/kustomize';

export async function startCluster(): Promise<Env> {
  const t0 = Date.now();
  try {
    current = await up({
      root: E2E_ROOT,
      nodes: E2E_NODES,
      overlay: E2E_OVERLAY,
      nodeKind: E2E_NODE_KIND,
      ...(process.env.KRT_BIN_DIR ? { binDir: process.env.KRT_BIN_DIR } : {}),
      ...(process.env.KRT_KUBELET_BIN_DIR ? { kubeletBinDir: process.env.KRT_KUBELET_BIN_DIR } : {}),
      progress: (m) => process.stderr.write(`  [e2e cluster] ${m}\n`),
    });
  } catch (err) {
    // Mocha runs no global teardown after a failed setup: stop what was started (logs are
    // kept with KRT_KEEP_E2E=1).
    await stopCluster();
    throw err;
  }
  process.stderr.write(`  [e2e cluster] ready in ${Date.now() - t0} ms at ${current.server}\n`);
  return current;
}

export async function stopCluster(): Promise<void> {
  current?.admin.close();
  current = undefined;
  await down(E2E_ROOT, { purge: process.env.KRT_KEEP_E2E !== '1' });
}

export function cluster(): Env {
  if (!current) throw new Error('the e2e cluster is not running (e2e/setup.ts starts it)');
  return current;
}
