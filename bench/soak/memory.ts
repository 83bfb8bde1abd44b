/** Resident memory of the environment's long-lived processes: baseline, peak and after the load. */
import type { KubeClient } from '../../lib/kube/client.ts';
import type { Component } from '../../localenv/environment.ts';
import type { MemorySample } from './accounting.ts';
import { componentPid, podPids, podsOf, rssMb } from './procs.ts';
import { RUNTIME } from './workload.ts';

const CONTROL: Component[] = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'node-agent'];

export class MemoryMonitor {
  private readonly base = new Map<string, number>();
  private readonly peak = new Map<string, number>();
  private readonly last = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  constructor(
    private readonly api: KubeClient,
    private readonly root: string,
    private readonly ns: string,
  ) {}

  /** One reading per component (per-Pod components: the largest process of their kind). */
  async sample(): Promise<void> {
    const now = new Map<string, number>();
    for (const c of CONTROL) now.set(c, rssMb(componentPid(this.root, c)));
    const ext = await podsOf(this.api, 'kruntimes-system', 'app.kubernetes.io/name=kruntimes-extension').catch(
      () => [],
    );
    now.set('extension server', Math.max(0, ...ext.flatMap((p) => Object.values(podPids(this.root, p)).map(rssMb))));
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
    return [...this.peak.keys()].map((component) => ({
      component,
      baselineMb: this.base.get(component) ?? 0,
      peakMb: this.peak.get(component) ?? 0,
      afterMb: this.last.get(component) ?? 0,
    }));
  }
}
