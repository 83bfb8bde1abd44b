/**
 * Memory of the environment's long-lived processes: resident memory (baseline, peak, after the
 * load) and, to tell retained state from memory a runtime has not returned, the live heap before
 * the load and after it: the extension server's V8 heap after forced full GCs, and the Go heap in
 * use of kube-apiserver and etcd (bench/soak/heap.ts).
 */
import { join } from 'node:path';
import type { KubeClient } from '../../lib/kube/client.ts';
import { readState, type Component } from '../../localenv/environment.ts';
import type { LiveSample, MemorySample } from './accounting.ts';
import { apiserverGoHeap, etcdGoHeap, nodeHeapAfterGc, type GoHeap, type NodeHeap } from './heap.ts';
import { componentPid, podPids, podsOf, rssMb } from './procs.ts';
import { RUNTIME } from './workload.ts';

const CONTROL: Component[] = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'node-agent'];
const EXTENSION = 'app.kubernetes.io/name=kruntimes-extension';

/** One live-heap reading: what the runtime holds in live objects, and its RSS at that moment. */
export interface LiveReading {
  liveMb: number;
  rssMb: number;
  /** Heap the runtime holds free but has not returned (V8: heap total - used; Go: idle - released). */
  freeMb: number;
}

const nodeReading = (h: NodeHeap): LiveReading => ({
  liveMb: h.heapUsedMb + h.externalMb,
  rssMb: h.rssMb,
  freeMb: h.heapTotalMb - h.heapUsedMb,
});

const goReading = (g: GoHeap): LiveReading => ({
  liveMb: g.heapInuseMb,
  rssMb: g.rssMb,
  freeMb: g.heapIdleMb - g.heapReleasedMb,
});

export class MemoryMonitor {
  private readonly base = new Map<string, number>();
  private readonly peak = new Map<string, number>();
  private readonly last = new Map<string, number>();
  private readonly liveBase = new Map<string, LiveReading>();
  private readonly liveAfter = new Map<string, LiveReading>();
  private timer: NodeJS.Timeout | undefined;
  constructor(
    private readonly api: KubeClient,
    private readonly root: string,
    private readonly ns: string,
    /** Where heap snapshots of the extension server go (`baseline`, `after`), when set. */
    private readonly snapshotDir?: string,
  ) {}

  private async extensionPids(): Promise<number[]> {
    const ext = await podsOf(this.api, 'kruntimes-system', EXTENSION).catch(() => []);
    return ext.flatMap((p) => Object.values(podPids(this.root, p)));
  }

  /** One reading per component (per-Pod components: the largest process of their kind). */
  async sample(): Promise<void> {
    const now = new Map<string, number>();
    for (const c of CONTROL) now.set(c, rssMb(componentPid(this.root, c)));
    now.set('extension server', Math.max(0, ...(await this.extensionPids()).map(rssMb)));
    const rt = await podsOf(this.api, this.ns, `runtime=${RUNTIME}`).catch(() => []);
    const per = rt.map((p) => podPids(this.root, p));
    now.set('runtimed (largest Pod)', Math.max(0, ...per.map((x) => rssMb(x.runtimed))));
    now.set('runtime server (largest Pod)', Math.max(0, ...per.map((x) => rssMb(x.runtime))));
    for (const [k, v] of now) {
      if (v <= 0) continue;
      this.last.set(k, v);
      this.peak.set(k, Math.max(v, this.peak.get(k) ?? 0));
    }
  }

  /** Live heap per component (extension server after forced GCs); a component that cannot be read is left out. */
  async live(stage: 'baseline' | 'drained' | 'settling' | 'after', log: (m: string) => void): Promise<void> {
    const into =
      stage === 'baseline' ? this.liveBase : stage === 'after' ? this.liveAfter : new Map<string, LiveReading>();
    const note = (c: string, err: unknown): void =>
      log(`live heap of ${c} not read: ${err instanceof Error ? err.message : String(err)}`);
    for (const pid of await this.extensionPids()) {
      const snap = this.snapshotDir ? join(this.snapshotDir, `extension-${stage}-${pid}.heapsnapshot`) : undefined;
      const h = await nodeHeapAfterGc(pid, snap).catch((err: unknown) => note('the extension server', err));
      if (h && h.heapUsedMb + h.externalMb > (into.get('extension server')?.liveMb ?? -1))
        into.set('extension server', nodeReading(h));
    }
    const agent = componentPid(this.root, 'node-agent');
    const a = agent ? await nodeHeapAfterGc(agent).catch((err: unknown) => note('the node agent', err)) : undefined;
    if (a) into.set('node-agent', nodeReading(a));
    const profile = this.snapshotDir ? join(this.snapshotDir, `kube-apiserver-${stage}.pprof`) : undefined;
    const api = await apiserverGoHeap(this.api, profile).catch((err: unknown) => note('kube-apiserver', err));
    if (api) into.set('kube-apiserver', goReading(api));
    const port = readState(this.root)?.ports.etcdClient;
    const etcd = port ? await etcdGoHeap(port).catch((err: unknown) => note('etcd', err)) : undefined;
    if (etcd) into.set('etcd', goReading(etcd));
    const read = [...into].map(
      ([c, r]) => `${c} ${r.liveMb.toFixed(0)} MB (free ${r.freeMb.toFixed(0)} MB, RSS ${r.rssMb.toFixed(0)} MB)`,
    );
    log(`live heap, ${stage}: ${read.join(', ')}`);
  }

  baseline(): void {
    for (const [k, v] of this.last) this.base.set(k, v);
  }

  start(): void {
    this.timer = setInterval(() => void this.sample().catch(() => undefined), 2000);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  report(): MemorySample[] {
    return [...this.peak.keys()].map((component) => {
      const b = this.liveBase.get(component);
      const a = this.liveAfter.get(component);
      const live: LiveSample | undefined =
        b && a ? { baselineMb: b.liveMb, afterMb: a.liveMb, rssAfterMb: a.rssMb } : undefined;
      return {
        component,
        baselineMb: this.base.get(component) ?? 0,
        peakMb: this.peak.get(component) ?? 0,
        afterMb: this.last.get(component) ?? 0,
        ...(live ? { live } : {}),
      };
    });
  }
}
