/** One Node served by the agent: registration, heartbeat, the pod watch and the pod workers. */
import { join } from 'node:path';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import type { KubeClient } from '../lib/kube/client.ts';
import { isApiError } from '../lib/kube/errors.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { ListWatch } from '../lib/kube/watch.ts';
import type { NodeAgentConfig, NodeConfig } from './config.ts';
import type { DataSource } from './env.ts';
import { heartbeat, registerNode } from './node.ts';
import type { Pod } from './pod-types.ts';
import { PodWorker } from './pod-worker.ts';
import { startServer, type LogSource } from './server.ts';
import { removePodDir } from './volumes.ts';
import type { Server } from 'node:https';

export interface AgentDeps {
  client: KubeClient;
  log: Logger;
  repoRoot: string;
  now: () => Date;
  allocateIP: (uid: string) => string;
  releaseIP: (uid: string) => void;
}

function dataSource(client: KubeClient): DataSource {
  const fetchData = async (path: string, b64: boolean): Promise<Record<string, string> | undefined> => {
    try {
      const o = await client.get<KubeObject & { data?: Record<string, string>; binaryData?: Record<string, string> }>(
        path,
      );
      const out: Record<string, string> = {};
      for (const [k, v] of Object.entries(o.data ?? {})) out[k] = b64 ? Buffer.from(v, 'base64').toString('utf8') : v;
      for (const [k, v] of Object.entries(o.binaryData ?? {})) out[k] = Buffer.from(v, 'base64').toString('utf8');
      return out;
    } catch (err) {
      if (isApiError(err, 404)) return undefined;
      throw err;
    }
  };
  return {
    secret: (ns, name) => fetchData(`/api/v1/namespaces/${ns}/secrets/${name}`, true),
    configMap: (ns, name) => fetchData(`/api/v1/namespaces/${ns}/configmaps/${name}`, false),
  };
}

export class NodeAgent {
  private readonly workers = new Map<string, PodWorker>();
  private readonly byName = new Map<string, { uid: string; pod: Pod }>();
  private watch: ListWatch<Pod> | undefined;
  private stopHeartbeat: (() => void) | undefined;
  private server: Server | undefined;
  private readonly data: DataSource;
  private readonly log: Logger;

  constructor(
    private readonly node: NodeConfig,
    private readonly cfg: NodeAgentConfig,
    private readonly d: AgentDeps,
  ) {
    this.data = dataSource(d.client);
    this.log = d.log.child({ node: node.name });
  }

  private podDir(uid: string): string {
    return join(this.cfg.stateDir, this.node.name, 'pods', uid);
  }

  async start(): Promise<void> {
    mkdirSync(join(this.cfg.stateDir, this.node.name, 'pods'), { recursive: true });
    this.server = await startServer({
      port: this.node.port,
      host: '127.0.0.1',
      cert: readFileSync(this.node.servingCertFile),
      key: readFileSync(this.node.servingKeyFile),
      clientCa: readFileSync(this.cfg.clientCaFile),
      source: this.logSource(),
    });
    const id = { name: this.node.name, port: this.node.port, hostIP: '127.0.0.1', podCidrHint: '' };
    const nodeObj = await registerNode(this.d.client, id, this.d.now);
    this.stopHeartbeat = heartbeat(this.d.client, id, nodeObj, this.log, this.d.now);
    this.watch = new ListWatch<Pod>(
      this.d.client,
      {
        path: '/api/v1/pods',
        fieldSelector: `spec.nodeName=${this.node.name}`,
        onError: (err) => this.log.warn({ err }, 'pod watch error'),
      },
      (delta) => (delta.type === 'deleted' ? this.onDeleted(delta.object) : this.onPod(delta.object)),
    );
    this.watch.start();
    await this.watch.synced;
    this.cleanOrphans();
    this.log.info({ port: this.node.port }, 'node registered and serving');
  }

  private onPod(pod: Pod): void {
    const uid = pod.metadata.uid ?? '';
    this.byName.set(`${pod.metadata.namespace}/${pod.metadata.name}`, { uid, pod });
    let w = this.workers.get(uid);
    if (!w) {
      const podIP = this.d.allocateIP(uid);
      w = new PodWorker(pod, {
        client: this.d.client,
        data: this.data,
        log: this.log.child({ namespace: pod.metadata.namespace, pod: pod.metadata.name }),
        nodeName: this.node.name,
        podDir: this.podDir(uid),
        podIP,
        hostIP: '127.0.0.1',
        repoRoot: this.d.repoRoot,
        clusterCa: readFileSync(this.cfg.clusterCaFile, 'utf8'),
        baseEnv: this.baseEnv(pod),
        now: this.d.now,
        onGone: () => {
          this.workers.delete(uid);
          this.d.releaseIP(uid);
        },
      });
      this.workers.set(uid, w);
    }
    w.update(pod);
  }

  private onDeleted(pod: Pod): void {
    const key = `${pod.metadata.namespace}/${pod.metadata.name}`;
    if (this.byName.get(key)?.uid === pod.metadata.uid) this.byName.delete(key);
    void this.workers.get(pod.metadata.uid ?? '')?.forget();
  }

  /** Directories of pods this node no longer has (the agent restarted meanwhile) are removed. */
  private cleanOrphans(): void {
    const dir = join(this.cfg.stateDir, this.node.name, 'pods');
    for (const uid of readdirSync(dir)) {
      if (!this.workers.has(uid)) removePodDir(join(dir, uid));
    }
  }

  private baseEnv(pod: Pod): Record<string, string> {
    const host = this.cfg.apiserverHost;
    const port = String(this.cfg.apiserverPort);
    return {
      HOSTNAME: pod.metadata.name ?? '',
      HOME: '/root',
      KUBERNETES_SERVICE_HOST: host,
      KUBERNETES_SERVICE_PORT: port,
      KUBERNETES_SERVICE_PORT_HTTPS: port,
      KUBERNETES_PORT: `tcp://${host}:${port}`,
      KUBERNETES_PORT_443_TCP: `tcp://${host}:${port}`,
      KUBERNETES_PORT_443_TCP_ADDR: host,
      KUBERNETES_PORT_443_TCP_PORT: port,
      KUBERNETES_PORT_443_TCP_PROTO: 'tcp',
    };
  }

  private logSource(): LogSource {
    return {
      find: (ns, name, container, previous) => {
        const entry = this.byName.get(`${ns}/${name}`);
        const w = entry && this.workers.get(entry.uid);
        if (!entry || !w) return { code: 404, error: `pod ${ns}/${name} not found on node ${this.node.name}` };
        return w.logFile(container, previous);
      },
    };
  }

  /** Stops every pod process (SIGTERM, then SIGKILL after graceMs) and the node's loops. */
  async stop(graceMs: number): Promise<void> {
    this.watch?.stop();
    this.stopHeartbeat?.();
    await Promise.all([...this.workers.values()].map((w) => w.stopContainers(graceMs)));
    this.server?.close();
  }
}
