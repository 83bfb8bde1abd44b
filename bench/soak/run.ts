/**
 * One soak: the workload submitted on the seeded load plan while the injector applies the seeded
 * fault plan, a drain, then the accounting (objects, markers, namespace deletion, orphans, memory).
 */
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { JOB_UID_LABEL } from '../../lib/jobclass/api.ts';
import { ListWatch } from '../../lib/kube/watch.ts';
import type { KubeClient } from '../../lib/kube/client.ts';
import { startOpenSandboxServer } from '../../e2e/opensandbox-server/server.ts';
import { cpuTicks, cpuTotalMs } from '../cpu.ts';
import { account, TERMINAL, type FaultRecord, type Outcome, type SoakResult } from './accounting.ts';
import { inject } from './faults.ts';
import { MemoryMonitor } from './memory.ts';
import {
  faultPlan,
  loadPlan,
  prng,
  FAULT_TARGETS,
  type FaultTarget,
  type LoadItem,
  type LoadKind,
} from './schedule.ts';
import { writeDiagnoses } from './diagnostics.ts';
import { finalCheck } from './final.ts';
import {
  G,
  markerCounts,
  outcomeOf,
  setupJobClasses,
  setupRuns,
  submit,
  until,
  X,
  type Obj,
  type Workload,
} from './workload.ts';

export interface SoakOptions {
  root: string;
  api: KubeClient;
  minutes: number;
  rate: number;
  maxItems: number;
  seed: number;
  meanFaultGapS: number;
  targets: readonly FaultTarget[];
  weights: Partial<Record<LoadKind, number>>;
  drainMs: number;
  /** How long after the namespace deletion "after" memory is read (default SETTLE_MS). */
  settleMs?: number;
  log: (m: string) => void;
  /** Where the diagnoses of the items that went wrong are written (nothing when none did). */
  diagnosticsFile?: string;
}

export const DEFAULT_WEIGHTS: Partial<Record<LoadKind, number>> = {
  'task-short': 4,
  'task-medium': 3,
  'task-long': 1,
  workflow: 1,
  'job-k8s': 1,
  'job-os': 1,
  'log-follow': 1,
  'session-op': 1,
};
export const DEFAULT_TARGETS = FAULT_TARGETS;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Phase history per object name, from watches of Runs, WorkflowRuns and Jobs in the namespace. */
class History {
  readonly phases = new Map<string, string[]>();
  readonly terminalAt = new Map<string, number>();
  private readonly watches: ListWatch<Obj>[] = [];
  constructor(api: KubeClient, ns: string) {
    for (const path of [
      `${G}/namespaces/${ns}/runs`,
      `${G}/namespaces/${ns}/workflowruns`,
      `${X}/namespaces/${ns}/jobs`,
    ])
      this.watches.push(new ListWatch<Obj>(api, { path }, (d) => this.see(d.object)));
  }
  private see(o: Obj): void {
    const name = o.metadata.name ?? '';
    const p = o.status?.phase;
    if (!p) return;
    const h = this.phases.get(name) ?? [];
    if (h[h.length - 1] !== p) h.push(p);
    this.phases.set(name, h);
    if (TERMINAL.has(p) && !this.terminalAt.has(name)) this.terminalAt.set(name, Date.now());
  }
  async start(): Promise<void> {
    for (const w of this.watches) w.start();
    await Promise.all(this.watches.map((w) => w.synced));
  }
  stop(): void {
    for (const w of this.watches) w.stop();
  }
}

/** The OpenSandbox adapter's sandboxes end when the test server says so: finish each Running one. */
function finishSandboxes(w: Workload, stop: { v: boolean }): Promise<void> {
  return (async () => {
    while (!stop.v && w.srv) {
      for (const s of w.srv.sandboxes.values()) if (s.status.state === 'Running') w.srv.finish(s.id, true);
      await sleep(500);
    }
  })();
}

interface Tracker {
  created: Map<string, number>;
  errors: Map<string, string>;
  items: LoadItem[];
}

async function drive(w: Workload, plan: LoadItem[], t: Tracker, t0: number): Promise<void> {
  const pending: Promise<void>[] = [];
  for (const item of plan) {
    const wait = t0 + item.atMs - Date.now();
    if (wait > 0) await sleep(wait);
    t.items.push(item);
    pending.push(
      submit(w, item, 60_000).then(
        () => void t.created.set(item.name, Date.now()),
        (err: unknown) => void t.errors.set(item.name, err instanceof Error ? err.message : String(err)),
      ),
    );
  }
  await Promise.all(pending);
}

function canaryFn(w: Workload, h: History, t: Tracker): () => Promise<void> {
  let n = 0;
  return async () => {
    const end = Date.now() + 180_000;
    while (Date.now() < end) {
      const item: LoadItem = { atMs: 0, kind: 'task-short', name: `canary-${n++}` };
      t.items.push(item);
      await submit(w, item, end - Date.now());
      t.created.set(item.name, Date.now());
      const phase = await until(
        `${item.name} to end`,
        () => Promise.resolve(h.terminalAt.has(item.name) ? h.phases.get(item.name)?.at(-1) : undefined),
        Math.max(1000, end - Date.now()),
      );
      if (phase === 'Succeeded') return;
    }
    throw new Error('no canary Run succeeded within 180 s');
  };
}

async function injectAll(w: Workload, o: SoakOptions, h: History, t: Tracker, t0: number): Promise<FaultRecord[]> {
  const faults = faultPlan({
    seed: o.seed,
    durationMs: o.minutes * 60_000,
    meanGapMs: o.meanFaultGapS * 1000,
    quietHeadMs: Math.min(60_000, o.minutes * 15_000),
    quietTailMs: Math.min(30_000, o.minutes * 10_000),
    targets: o.targets,
    pauseShare: 0.3,
    pauseMs: [2000, 8000],
  });
  o.log(`fault plan: ${faults.map((f) => `${Math.round(f.atMs / 1000)}s ${f.target} ${f.action}`).join('; ')}`);
  const ctx = { api: w.api, root: o.root, ns: w.ns, rnd: prng(o.seed + 1), log: o.log, canary: canaryFn(w, h, t) };
  const out: FaultRecord[] = [];
  for (const f of faults) {
    const wait = t0 + f.atMs - Date.now();
    if (wait > 0) await sleep(wait);
    out.push(await inject(ctx, f));
  }
  return out;
}

function settled(w: Workload, h: History, t: Tracker, name: string, kind: LoadKind): boolean {
  if (t.errors.has(name)) return true;
  if (kind === 'session-op' || kind === 'log-follow') {
    if (!w.direct.has(name)) return false;
    if (kind === 'session-op') return true;
  }
  return h.terminalAt.has(name);
}

export async function runSoak(o: SoakOptions): Promise<SoakResult> {
  const suffix = `${process.pid}-${o.seed}`;
  const ns = `soak-${suffix}`;
  const srv =
    (o.weights['job-os'] ?? 0) > 0 ? await startOpenSandboxServer({ apiKeys: ['k'], insecure: true }) : undefined;
  const w: Workload = {
    api: o.api,
    ns,
    root: o.root,
    markers: join(o.root, 'soak-markers', ns),
    suffix,
    session: 'soak-shell',
    direct: new Map(),
    ...(srv ? { srv } : {}),
  };
  try {
    o.log(`setting up namespace ${ns}`);
    await setupRuns(w);
    await setupJobClasses(w);
    const pvc = await o.api.get<Obj>(`/api/v1/namespaces/${ns}/persistentvolumeclaims/soak-artifacts`);
    w.artifactVolume = (pvc.spec as { volumeName?: string } | undefined)?.volumeName ?? '';
    const h = new History(o.api, ns);
    await h.start();
    const mem = new MemoryMonitor(o.api, o.root, ns, process.env.KRT_SOAK_HEAP_SNAPSHOTS);
    await mem.live('baseline', o.log);
    await mem.sample();
    mem.baseline();
    mem.start();
    const stop = { v: false };
    const finisher = finishSandboxes(w, stop);
    const t: Tracker = { created: new Map(), errors: new Map(), items: [] };
    const plan = loadPlan({
      seed: o.seed,
      durationMs: o.minutes * 60_000,
      rate: o.rate,
      maxItems: o.maxItems,
      weights: o.weights,
    });
    o.log(`load plan: ${plan.length} items over ${o.minutes} min`);
    const t0 = Date.now() + 1000;
    const mine = (cmd: string): boolean => cmd.includes(o.root);
    const cpu0 = cpuTicks(mine);
    const [faults] = await Promise.all([injectAll(w, o, h, t, t0), drive(w, plan, t, t0)]);
    o.log(`load done; draining (up to ${o.drainMs / 1000} s)`);
    await until(
      'every item to settle',
      () => Promise.resolve(t.items.every((i) => settled(w, h, t, i.name, i.kind)) || undefined),
      o.drainMs,
    ).catch((e: Error) => o.log(e.message));
    const cpu = {
      ms: cpuTotalMs(cpu0, cpuTicks(mine)),
      items: t.items.length,
      wallMs: Date.now() - t0,
      cores: availableParallelism(),
    };
    stop.v = true;
    await finisher;
    const { outcomes, objects, markersText } = await collect(w, h, t);
    h.stop();
    if (o.diagnosticsFile) {
      const n = await writeDiagnoses(o.api, ns, o.diagnosticsFile, { outcomes, objects, markersText });
      if (n) o.log(`${n} items went wrong: their objects, Events and markers are in ${o.diagnosticsFile}`);
    }
    // "After": per-Pod components 10 s after the drain (their Pods go with the namespace), the
    // rest once the namespace was deleted and the runtimes had time to return what they freed
    // (Go's scavenger and V8's idle collections give memory back over minutes, not seconds).
    await sleep(10_000);
    await mem.sample();
    if (process.env.KRT_SOAK_HEAP_SNAPSHOTS) await mem.live('drained', o.log);
    const fin = await finalCheck(w, o.log);
    const settle = o.settleMs ?? SETTLE_MS;
    o.log(`letting memory settle for ${settle / 1000} s`);
    await sleep(Math.min(settle, SETTLE_MS));
    if (settle > SETTLE_MS) {
      await mem.live('settling', o.log);
      await sleep(settle - SETTLE_MS);
    }
    await mem.sample();
    mem.stop();
    await mem.live('after', o.log);
    return account(outcomes, faults, { ...fin, memory: mem.report(), end: Date.now(), cpu });
  } finally {
    await srv?.close();
  }
}

/** How long after the namespace deletion "after" memory is read. */
const SETTLE_MS = 120_000;

interface Collection {
  outcomes: Outcome[];
  objects: Map<string, Obj>;
  markersText: string;
}

async function collect(w: Workload, h: History, t: Tracker): Promise<Collection> {
  const objects = new Map<string, Obj>();
  for (const path of [
    `${G}/namespaces/${w.ns}/runs`,
    `${G}/namespaces/${w.ns}/workflowruns`,
    `${X}/namespaces/${w.ns}/jobs`,
  ]) {
    const l = await until(`list ${path}`, () => w.api.list<Obj>(path), 60_000);
    for (const o of l.items) objects.set(o.metadata.name ?? '', o);
  }
  const markersText = readFileSync(join(w.markers, 'markers'), 'utf8');
  const markers = markerCounts(markersText);
  const sandboxes = new Map<string, number>();
  for (const s of w.srv?.sandboxes.values() ?? []) {
    const uid = s.request.metadata?.[JOB_UID_LABEL] ?? '';
    sandboxes.set(uid, (sandboxes.get(uid) ?? 0) + 1);
  }
  const outcomes = t.items.map((item) => {
    const out = outcomeOf(w, item, t.created.get(item.name), h.phases.get(item.name) ?? [], {
      objects,
      markers,
      sandboxes,
    });
    if (t.errors.has(item.name)) out.createError = t.errors.get(item.name);
    if (out.completedAt === undefined && h.terminalAt.has(item.name)) out.completedAt = h.terminalAt.get(item.name);
    if (out.phase && out.phases.length === 0) out.phases = [out.phase];
    return out;
  });
  return { outcomes, objects, markersText };
}
