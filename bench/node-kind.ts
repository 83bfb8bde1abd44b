/**
 * Which node kind a benchmark's own environment runs on: BENCH_NODE_KIND=kubelet for a real
 * kubelet + containerd + runc (one node, docs/kubelet-node.md; KRT_KUBELET_BIN_DIR from
 * scripts/build-kubelet.sh), else the node agent with the benchmark's nodes.
 */
import type { NodeKind } from '../localenv/environment.ts';

export const BENCH_NODE_KIND: NodeKind = process.env.BENCH_NODE_KIND === 'kubelet' ? 'kubelet' : 'agent';

export function benchUpOptions(nodes: string[]): {
  nodes: string[];
  nodeKind: NodeKind;
  binDir?: string;
  kubeletBinDir?: string;
} {
  return {
    nodes: BENCH_NODE_KIND === 'kubelet' ? nodes.slice(0, 1) : nodes,
    nodeKind: BENCH_NODE_KIND,
    ...(process.env.KRT_BIN_DIR ? { binDir: process.env.KRT_BIN_DIR } : {}),
    ...(process.env.KRT_KUBELET_BIN_DIR ? { kubeletBinDir: process.env.KRT_KUBELET_BIN_DIR } : {}),
  };
}
