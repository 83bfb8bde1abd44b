/**
 * The soak's final accounting (pure): every submitted item classified exactly once, latencies
 * split by whether a fault window overlapped them, recovery per fault kind, memory per component,
 * and the result table.
 */
import { percentile } from '../stats.ts';
import type { FaultAction, FaultTarget, LoadKind } from './schedule.ts';

export interface Outcome {
  name: string;
  kind: LoadKind;
  /** When the create was acknowledged (epoch ms); absent when it never was. */
  createdAt?: number;
  createError?: string;
  /** The final phase and its reason (condition reason or status reason). */
  phase?: string;
  reason?: string;
  completedAt?: number;
  /** Phases seen in order by the watch; a terminal phase followed by any other is a violation. */
  phases: string[];
  /** Executions recorded by the item's own side effect; absent for kinds that cannot record one. */
  executions?: number;
  /** Outputs and artifact digests as written (absent when the kind has none to check). */
  outputsOk?: boolean;
  outputsProblem?: string;
  /** A followed log could not be read to its end because its Runtime Pod was deleted: the logs API's
   * documented 409 Conflict ("its logs are gone with it"), not a record the platform lost. */
  logsGone?: boolean;
}

export interface FaultRecord {
  target: FaultTarget;
  action: FaultAction;
  atMs: number;
  /** When the platform served again (epoch ms); absent when it never did. */
  recoveredAt?: number;
  /** Epoch ms of the fault's start. */
  startedAt: number;
  error?: string;
}

export interface MemorySample {
  component: string;
  baselineMb: number;
  peakMb: number;
  afterMb: number;
  /** Live heap before and after the load (V8: heap used + external after forced GCs; Go: heap in use). */
  live?: LiveSample;
}

export interface LiveSample {
  baselineMb: number;
  afterMb: number;
  /** RSS when the "after" live heap was read (for V8, right after the forced GCs). */
  rssAfterMb: number;
}

/** How far above its baseline a live heap may end and still count as back (noise of a running process). */
export const LIVE_SLACK = { ratio: 0.1, mb: 10 };

/**
 * Whether a component's live heap ended above its baseline by more than the slack: state it
 * still holds after the load, as opposed to RSS the runtime has not returned (freed but kept).
 */
export function retained(m: MemorySample): boolean {
  if (!m.live) return false;
  return m.live.afterMb > m.live.baselineMb * (1 + LIVE_SLACK.ratio) + LIVE_SLACK.mb;
}

/**
 * kruntimes' own long-lived processes: state they retain after the load fails the soak. The
 * control plane's is reported only: kube-apiserver keeps a window of recent watch events per
 * resource (and, until the next compaction, snapshots of its watch cache), etcd its history until
 * compaction; both bounded by design and not state kruntimes holds (docs/benchmarks.md).
 */
export const OWN_PROCESSES = new Set(['extension server', 'node-agent']);

function memoryProblems(memory: MemorySample[]): string[] {
  return memory
    .filter((m) => OWN_PROCESSES.has(m.component) && retained(m))
    .map(
      (m) => `retained: ${m.component} live heap ${m.live?.baselineMb.toFixed(0)} -> ${m.live?.afterMb.toFixed(0)} MB`,
    );
}

/** Terminal phases of Runs, WorkflowRuns and JobClass Jobs. Not a Job's Unknown (ResultUnknown):
 * it is not terminal (docs/jobclass.md) and turns back once the execution is observed again. */
export const TERMINAL = new Set(['Succeeded', 'Failed', 'Timeout', 'Cancelled']);

export type Verdict =
  'succeeded' | 'logs-gone' | 'failed' | 'rejected' | 'lost' | 'duplicated' | 'wrong-output' | 'flipped';

/** One verdict per item, the worst that applies (a duplicate is a duplicate even if it succeeded). */
export function verdict(o: Outcome): Verdict {
  if (o.createdAt === undefined) return 'rejected';
  if ((o.executions ?? 0) > 1) return 'duplicated';
  if (flipped(o.phases)) return 'flipped';
  if (!o.phase || !TERMINAL.has(o.phase)) return 'lost';
  if (o.phase !== 'Succeeded') return 'failed';
  if (o.executions === 0 || o.outputsOk === false) return 'wrong-output';
  if (o.logsGone) return 'logs-gone';
  return 'succeeded';
}

/** A terminal phase followed by any different phase: the item did not end exactly once. */
export function flipped(phases: string[]): boolean {
  const first = phases.findIndex((p) => TERMINAL.has(p));
  return first >= 0 && phases.slice(first).some((p) => p !== phases[first]);
}

export interface SoakResult {
  submitted: number;
  counts: Record<Verdict, number>;
  /** Failure reasons and how often each occurred (failed items only). */
  failedReasons: Record<string, number>;
  /** Items whose failure has no reason: counted as failures without a correct reason. */
  failedWithoutReason: number;
  stuck: string[];
  orphans: string[];
  latency: { faultFree: Pct; duringFaults: Pct };
  recovery: { kind: string; n: number; p50Ms: number; maxMs: number; unrecovered: number }[];
  memory: MemorySample[];
  /** CPU of the environment's processes from the first item to the end of the drain. */
  cpu?: SoakCpu;
  problems: string[];
}

/** The environment's CPU while it was loaded, to state the rate the machine can sustain. */
export interface SoakCpu {
  ms: number;
  items: number;
  wallMs: number;
  cores: number;
}

/** CPU per item, and the rate at which that CPU would fill every core. */
export function capacity(c: SoakCpu): { perItemMs: number; maxRate: number } {
  const perItemMs = c.items ? c.ms / c.items : NaN;
  return { perItemMs, maxRate: (c.cores * 1000) / perItemMs };
}

interface Pct {
  n: number;
  p50: number;
  p99: number;
}

/** Windows [start, end] during which a fault was active (unrecovered faults last until `end`). */
export function faultWindows(faults: FaultRecord[], end: number): [number, number][] {
  return faults.map((f) => [f.startedAt, f.recoveredAt ?? end]);
}

function overlaps(a: number, b: number, w: [number, number][]): boolean {
  return w.some(([s, e]) => a <= e && b >= s);
}

function pct(xs: number[]): Pct {
  return { n: xs.length, p50: percentile(xs, 50), p99: percentile(xs, 99) };
}

export function account(
  outcomes: Outcome[],
  faults: FaultRecord[],
  extra: { stuck: string[]; orphans: string[]; memory: MemorySample[]; end: number; cpu?: SoakCpu },
): SoakResult {
  const counts: Record<Verdict, number> = {
    succeeded: 0,
    'logs-gone': 0,
    failed: 0,
    rejected: 0,
    lost: 0,
    duplicated: 0,
    'wrong-output': 0,
    flipped: 0,
  };
  const failedReasons: Record<string, number> = {};
  let failedWithoutReason = 0;
  const problems: string[] = [];
  for (const o of outcomes) {
    const v = verdict(o);
    counts[v]++;
    if (v === 'failed') {
      if (o.reason) failedReasons[`${o.phase}/${o.reason}`] = (failedReasons[`${o.phase}/${o.reason}`] ?? 0) + 1;
      else failedWithoutReason++;
    }
    if (!['succeeded', 'logs-gone', 'failed', 'rejected'].includes(v)) problems.push(describe(o, v));
  }
  return {
    submitted: outcomes.filter((o) => o.createdAt !== undefined).length,
    counts,
    failedReasons,
    failedWithoutReason,
    stuck: extra.stuck,
    orphans: extra.orphans,
    latency: latencies(outcomes, faultWindows(faults, extra.end)),
    recovery: recovery(faults),
    memory: extra.memory,
    ...(extra.cpu ? { cpu: extra.cpu } : {}),
    problems,
  };
}

function describe(o: Outcome, v: Verdict): string {
  const detail = [
    `phase ${o.phase ?? 'none'}`,
    o.reason ? `reason ${o.reason}` : '',
    o.executions !== undefined ? `executions ${o.executions}` : '',
    o.outputsProblem ?? '',
    `phases ${o.phases.join('>')}`,
  ].filter(Boolean);
  return `${v}: ${o.kind} ${o.name} (${detail.join(', ')})`;
}

function latencies(outcomes: Outcome[], windows: [number, number][]): SoakResult['latency'] {
  const free: number[] = [];
  const during: number[] = [];
  for (const o of outcomes) {
    if (o.createdAt === undefined || o.completedAt === undefined || o.phase !== 'Succeeded') continue;
    const d = o.completedAt - o.createdAt;
    (overlaps(o.createdAt, o.completedAt, windows) ? during : free).push(d);
  }
  return { faultFree: pct(free), duringFaults: pct(during) };
}

function recovery(faults: FaultRecord[]): SoakResult['recovery'] {
  const by = new Map<string, FaultRecord[]>();
  for (const f of faults) {
    const k = `${f.target} ${f.action}`;
    by.set(k, [...(by.get(k) ?? []), f]);
  }
  return [...by.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([kind, fs]) => {
      const ts = fs.filter((f) => f.recoveredAt !== undefined).map((f) => f.recoveredAt! - f.startedAt);
      return {
        kind,
        n: fs.length,
        p50Ms: percentile(ts, 50),
        maxMs: ts.length ? Math.max(...ts) : NaN,
        unrecovered: fs.length - ts.length,
      };
    });
}

const sec = (ms: number): string => (Number.isFinite(ms) ? `${(ms / 1000).toFixed(1)} s` : 'n/a');

/** The issue's result table (markdown), then the problems, one a line. */
export function formatResult(r: SoakResult): string {
  const c = r.counts;
  const reasons = Object.entries(r.failedReasons)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  const rows: [string, string][] = [
    ['submitted (create acknowledged)', String(r.submitted)],
    ['rejected at submit (client saw the error, retried until the deadline)', String(c.rejected)],
    ['succeeded (outputs, artifact digests and one execution checked)', String(c.succeeded)],
    ['succeeded, log gone with its deleted Runtime Pod (documented 409)', String(c['logs-gone'])],
    ['failed with a reason', `${c.failed - r.failedWithoutReason}${reasons ? ` (${reasons})` : ''}`],
    ['failed without a reason', String(r.failedWithoutReason)],
    ['lost (not terminal at the end)', String(c.lost)],
    ['duplicated executions', String(c.duplicated)],
    ['terminal more than once (phase changed after terminal)', String(c.flipped)],
    ['succeeded with wrong or missing outputs/execution', String(c['wrong-output'])],
    ['stuck objects (finalizer, namespace)', String(r.stuck.length)],
    ['orphaned Pods/sandboxes', String(r.orphans.length)],
    [
      'latency create->Succeeded without faults p50 / p99',
      `${sec(r.latency.faultFree.p50)} / ${sec(r.latency.faultFree.p99)} (n=${r.latency.faultFree.n})`,
    ],
    [
      'latency create->Succeeded during faults p50 / p99',
      `${sec(r.latency.duringFaults.p50)} / ${sec(r.latency.duringFaults.p99)} (n=${r.latency.duringFaults.n})`,
    ],
  ];
  for (const f of r.recovery)
    rows.push([
      `recovery: ${f.kind} (n=${f.n})`,
      `p50 ${sec(f.p50Ms)}, max ${sec(f.maxMs)}${f.unrecovered ? `, ${f.unrecovered} unrecovered` : ''}`,
    ]);
  if (r.cpu) {
    const { perItemMs, maxRate } = capacity(r.cpu);
    rows.push([
      'CPU of the environment, first item to drained (a killed process takes its CPU with it: read from a run without faults)',
      `${(r.cpu.ms / 1000).toFixed(1)} cpu-s over ${sec(r.cpu.wallMs)} for ${r.cpu.items} items: ${perItemMs.toFixed(0)} ms per item, so at most ${maxRate.toFixed(1)} items/s on ${r.cpu.cores} cores`,
    ]);
  }
  for (const m of r.memory) rows.push(...memoryRows(m));
  const table = ['| measure | value |', '|---|---|', ...rows.map(([a, b]) => `| ${a} | ${b} |`)];
  const problems = [
    ...r.problems,
    ...r.stuck.map((s) => `stuck: ${s}`),
    ...r.orphans.map((s) => `orphan: ${s}`),
    ...memoryProblems(r.memory),
  ];
  return `${[...table, ...(problems.length ? ['', 'problems:', ...problems.map((p) => `- ${p}`)] : [])].join('\n')}\n`;
}

function memoryRows(m: MemorySample): [string, string][] {
  const mb = (n: number): string => n.toFixed(0);
  const rows: [string, string][] = [
    [
      `memory: ${m.component} RSS baseline / peak / after`,
      `${mb(m.baselineMb)} / ${mb(m.peakMb)} / ${mb(m.afterMb)} MB`,
    ],
  ];
  if (m.live)
    rows.push([
      `memory: ${m.component} live heap baseline / after (RSS then)`,
      `${mb(m.live.baselineMb)} / ${mb(m.live.afterMb)} MB (${mb(m.live.rssAfterMb)} MB): ${retained(m) ? '**retained**' : 'back to baseline'}`,
    ]);
  return rows;
}

/** True when the soak's invariants hold: nothing lost, run twice, flipped, wrong, stuck, orphaned or retained by kruntimes. */
export function clean(r: SoakResult): boolean {
  return (
    r.counts.lost === 0 &&
    r.counts.duplicated === 0 &&
    r.counts.flipped === 0 &&
    r.counts['wrong-output'] === 0 &&
    r.failedWithoutReason === 0 &&
    r.stuck.length === 0 &&
    r.orphans.length === 0 &&
    memoryProblems(r.memory).length === 0
  );
}
