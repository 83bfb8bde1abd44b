/** Node registration, status heartbeat and the kube-node-lease Lease renewal. */
import os from 'node:os';
import type { Logger } from 'pino';
import { PatchType, type KubeClient } from '../lib/kube/client.ts';
import { isApiError } from '../lib/kube/errors.ts';
import type { KubeObject } from '../lib/kube/types.ts';

export const KUBELET_VERSION = 'v1.34.4';
const LEASE_SECONDS = 40;

export interface NodeIdentity {
  name: string;
  port: number;
  hostIP: string;
  podCidrHint: string;
}

function conditions(now: string): object[] {
  const c = (type: string, status: string, reason: string, message: string): object => ({
    type,
    status,
    reason,
    message,
    lastHeartbeatTime: now,
    lastTransitionTime: now,
  });
  return [
    c('MemoryPressure', 'False', 'KubeletHasSufficientMemory', 'node agent has sufficient memory available'),
    c('DiskPressure', 'False', 'KubeletHasNoDiskPressure', 'node agent has no disk pressure'),
    c('PIDPressure', 'False', 'KubeletHasSufficientPID', 'node agent has sufficient PID available'),
    c('Ready', 'True', 'KubeletReady', 'kruntimes node agent is posting ready status'),
  ];
}

export function nodeStatus(id: NodeIdentity, now: string): object {
  const memKi = `${Math.floor(os.totalmem() / 1024)}Ki`;
  const capacity = { cpu: String(os.cpus().length), memory: memKi, pods: '110', 'ephemeral-storage': '100Gi' };
  return {
    capacity,
    allocatable: capacity,
    conditions: conditions(now),
    addresses: [
      { type: 'InternalIP', address: id.hostIP },
      { type: 'Hostname', address: id.name },
    ],
    daemonEndpoints: { kubeletEndpoint: { Port: id.port } },
    nodeInfo: {
      machineID: '',
      systemUUID: '',
      bootID: '',
      kernelVersion: os.release(),
      osImage: 'kruntimes node agent (host processes)',
      containerRuntimeVersion: 'kruntimes-host://1',
      kubeletVersion: KUBELET_VERSION,
      kubeProxyVersion: '',
      operatingSystem: 'linux',
      architecture: 'amd64',
    },
  };
}

export async function registerNode(client: KubeClient, id: NodeIdentity, now: () => Date): Promise<KubeObject> {
  const labels = {
    'kubernetes.io/hostname': id.name,
    'kubernetes.io/os': 'linux',
    'kubernetes.io/arch': 'amd64',
    'node.kruntimes.io/agent': 'host-process',
  };
  const body = {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: id.name, labels },
    spec: {},
    status: nodeStatus(id, now().toISOString()),
  };
  try {
    return await client.create<KubeObject>('/api/v1/nodes', body);
  } catch (err) {
    if (!isApiError(err, 409)) throw err;
    return updateNodeStatus(client, id, now);
  }
}

export function updateNodeStatus(client: KubeClient, id: NodeIdentity, now: () => Date): Promise<KubeObject> {
  return client.patch<KubeObject>(
    `/api/v1/nodes/${id.name}/status`,
    { status: nodeStatus(id, now().toISOString()) },
    PatchType.strategic,
  );
}

export async function renewLease(client: KubeClient, node: KubeObject, now: () => Date): Promise<void> {
  const name = node.metadata.name ?? '';
  const path = `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${name}`;
  const renewTime = now().toISOString().replace('Z', '000Z');
  const spec = { holderIdentity: name, leaseDurationSeconds: LEASE_SECONDS, renewTime };
  try {
    await client.patch(path, { spec }, PatchType.merge);
  } catch (err) {
    if (!isApiError(err, 404)) throw err;
    await client.create('/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases', {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name,
        namespace: 'kube-node-lease',
        ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name, uid: node.metadata.uid }],
      },
      spec,
    });
  }
}

/** Renews the Lease every 10 s and the Node status every 60 s until stopped. */
export function heartbeat(
  client: KubeClient,
  id: NodeIdentity,
  node: KubeObject,
  log: Logger,
  now: () => Date,
): () => void {
  let ticks = 0;
  const tick = async (): Promise<void> => {
    try {
      await renewLease(client, node, now);
      if (++ticks % 6 === 0) await updateNodeStatus(client, id, now);
    } catch (err) {
      log.warn({ err, node: id.name }, 'node heartbeat failed');
    }
  };
  void tick();
  const timer = setInterval(() => void tick(), 10_000);
  return () => clearInterval(timer);
}
