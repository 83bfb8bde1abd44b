/** A WorkflowRun: the job DAG (dagre layout, live phase colours), a Gantt of jobs and steps, job outputs and artifacts. */
import * as dagreModule from '@dagrejs/dagre';
import { useState } from 'preact/hooks';
import { KRT, post, useAccess, useWatch, type Obj } from './api.ts';
import { Logs } from './run.tsx';
import { href, Loading, Phase, Refused, Section, span, str } from './common.tsx';

interface Step {
  name?: string;
  phase?: string;
  runName?: string;
  startedAt?: string;
  finishedAt?: string;
}
interface Job {
  phase?: string;
  steps?: Step[];
  outputs?: Record<string, string>;
  artifacts?: Record<string, { name?: string; sizeBytes?: number }>;
  startedAt?: string;
  finishedAt?: string;
  message?: string;
  combinations?: {
    id: string;
    name: string;
    phase?: string;
    steps?: Step[];
    startedAt?: string;
    finishedAt?: string;
  }[];
}
type JobSpec = { needs?: string[] | string };

const NODE_W = 170;
const NODE_H = 44;

function needsOf(spec: JobSpec | undefined): string[] {
  const n = spec?.needs;
  return n === undefined ? [] : Array.isArray(n) ? n : [n];
}

interface Pt {
  x: number;
  y: number;
}
/** The part of dagre's graph used here (@dagrejs/graphlib ships its types directory empty). */
interface DagreGraph {
  setGraph(g: object): void;
  setDefaultEdgeLabel(f: () => object): void;
  setNode(id: string, label: { width: number; height: number }): void;
  setEdge(from: string, to: string): void;
  nodes(): string[];
  edges(): { v: string; w: string }[];
  node(id: string): Pt;
  edge(e: { v: string; w: string }): { points?: Pt[] };
  graph(): { width?: number; height?: number };
}
const dagre = dagreModule as unknown as { Graph: new () => DagreGraph; layout: (g: DagreGraph) => void };

export interface DagLayout {
  nodes: (Pt & { id: string })[];
  edges: { points: Pt[] }[];
  width: number;
  height: number;
}

/** Dagre's layered layout of the jobs, left to right (an edge from each need to its job). */
export function layoutDag(jobs: Record<string, JobSpec>): DagLayout {
  const g = new dagre.Graph();
  g.setGraph({ rankdir: 'LR', nodesep: 24, ranksep: 60, marginx: 10, marginy: 10 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const id of Object.keys(jobs)) g.setNode(id, { width: NODE_W, height: NODE_H });
  for (const [id, spec] of Object.entries(jobs)) for (const n of needsOf(spec)) if (n in jobs) g.setEdge(n, id);
  dagre.layout(g);
  const nodes = g.nodes().map((id) => ({ id, x: g.node(id).x, y: g.node(id).y }));
  const edges = g.edges().map((e) => ({ points: g.edge(e).points ?? [] }));
  const gl = g.graph();
  return { nodes, edges, width: gl.width ?? 0, height: gl.height ?? 0 };
}

function Dag({
  jobs,
  status,
  select,
}: {
  jobs: Record<string, JobSpec>;
  status: Record<string, Job>;
  select: (j: string) => void;
}) {
  const l = layoutDag(jobs);
  return (
    <svg class="dag" width={l.width} height={l.height} viewBox={`0 0 ${l.width} ${l.height}`}>
      {l.edges.map((e, i) => (
        <polyline key={i} class="edge" points={e.points.map((p) => `${p.x},${p.y}`).join(' ')} />
      ))}
      {l.nodes.map((n) => {
        const phase = status[n.id]?.phase ?? 'Pending';
        return (
          <g
            key={n.id}
            class={`node phase-${phase}`}
            data-job={n.id}
            data-phase={phase}
            transform={`translate(${n.x - NODE_W / 2},${n.y - NODE_H / 2})`}
            onClick={() => select(n.id)}
          >
            <rect width={NODE_W} height={NODE_H} rx={8} />
            <text x={12} y={19} class="job-name">
              {n.id}
            </text>
            <text x={12} y={35} class="job-phase">
              {phase}
            </text>
          </g>
        );
      })}
    </svg>
  );
}

interface Bar {
  label: string;
  phase: string;
  start?: number;
  end?: number;
  depth: number;
}

/** One bar per job (and matrix combination) and per step, on one time axis: gaps show as white space. */
export function ganttBars(status: Record<string, Job>, now: number): { bars: Bar[]; t0: number; t1: number } {
  const bars: Bar[] = [];
  const t = (s?: string): number | undefined => (s ? Date.parse(s) : undefined);
  const push = (label: string, x: { phase?: string; startedAt?: string; finishedAt?: string }, depth: number): void => {
    const start = t(x.startedAt);
    bars.push({
      label,
      phase: x.phase ?? 'Pending',
      start,
      end: t(x.finishedAt) ?? (start !== undefined ? now : undefined),
      depth,
    });
  };
  const ordered = Object.entries(status).sort((a, b) => (a[1].startedAt ?? '~').localeCompare(b[1].startedAt ?? '~'));
  for (const [name, j] of ordered) {
    push(name, j, 0);
    for (const c of j.combinations ?? []) {
      push(c.name, c, 1);
      for (const s of c.steps ?? []) push(s.name ?? '', s, 2);
    }
    for (const s of j.steps ?? []) push(s.name ?? '', s, 1);
  }
  const starts = bars.flatMap((b) => (b.start === undefined ? [] : [b.start]));
  const ends = bars.flatMap((b) => (b.end === undefined ? [] : [b.end]));
  return { bars, t0: starts.length ? Math.min(...starts) : now, t1: ends.length ? Math.max(...ends) : now };
}

function Gantt({ status }: { status: Record<string, Job> }) {
  const { bars, t0, t1 } = ganttBars(status, Date.now());
  const W = 640;
  const L = 200;
  const H = 20;
  const scale = (x: number): number => L + ((x - t0) / Math.max(1, t1 - t0)) * W;
  return (
    <svg class="gantt" width={L + W + 60} height={bars.length * H + 24}>
      {bars.map((b, i) => (
        <g key={i} transform={`translate(0,${i * H})`}>
          <text x={4 + b.depth * 14} y={14} class={b.depth ? 'step' : 'job'}>
            {b.label}
          </text>
          {b.start !== undefined && b.end !== undefined && (
            <>
              <rect
                class={`bar phase-${b.phase}`}
                x={scale(b.start)}
                y={3}
                width={Math.max(2, scale(b.end) - scale(b.start))}
                height={H - 6}
                rx={3}
              />
              <text x={scale(b.end) + 4} y={14} class="dur">
                {span(b.end - b.start)}
              </text>
            </>
          )}
        </g>
      ))}
      <text x={L} y={bars.length * H + 16} class="axis">
        0
      </text>
      <text x={L + W} y={bars.length * H + 16} class="axis" text-anchor="end">
        {span(t1 - t0)}
      </text>
    </svg>
  );
}

function JobDetail({ ns, name, job }: { ns: string; name: string; job: Job | undefined }) {
  const [logRun, setLogRun] = useState<string>('');
  if (!job) return <div class="muted">job {name} has not started</div>;
  const steps = [...(job.steps ?? []), ...(job.combinations ?? []).flatMap((c) => c.steps ?? [])];
  return (
    <div class="job-detail">
      <h3>
        {name} <Phase phase={job.phase} />
      </h3>
      {job.message && <div class="message">{job.message}</div>}
      <table>
        <tbody>
          {steps.map((s, i) => (
            <tr key={i}>
              <td>{s.name}</td>
              <td>
                <Phase phase={s.phase} />
              </td>
              <td>{s.runName && <a href={href('ns', ns, 'runs', s.runName)}>{s.runName}</a>}</td>
              <td>{s.runName && <button onClick={() => setLogRun(s.runName ?? '')}>logs</button>}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <h3>Outputs</h3>
      <KV rows={Object.entries(job.outputs ?? {})} />
      <h3>Artifacts</h3>
      <KV
        rows={Object.entries(job.artifacts ?? {}).map(([k, a]) => [k, `${a.name ?? k} (${a.sizeBytes ?? '?'} bytes)`])}
      />
      {logRun && <Logs key={logRun} ns={ns} run={logRun} />}
    </div>
  );
}

function KV({ rows }: { rows: [string, unknown][] }) {
  if (!rows.length) return <div class="muted">none</div>;
  return (
    <table>
      <tbody>
        {rows.map(([k, v]) => (
          <tr key={k}>
            <td>{k}</td>
            <td>
              <code>{str(v)}</code>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function CancelWfr({ ns, name, phase }: { ns: string; name: string; phase: string }) {
  const [allowed] = useAccess([{ namespace: ns, verb: 'patch', resource: 'workflowruns', name }]) ?? [false];
  const [msg, setMsg] = useState('');
  if (!allowed || ['Succeeded', 'Failed', 'Cancelled'].includes(phase)) return null;
  return (
    <>
      <button
        class="danger"
        onClick={() =>
          void post(`/api/workflowruns/${ns}/${name}/cancel`).then(
            () => setMsg('cancellation requested'),
            (e: Error) => setMsg(e.message),
          )
        }
      >
        Cancel WorkflowRun
      </button>
      {msg && <span class="muted"> {msg}</span>}
    </>
  );
}

export function WorkflowRunPage({ ns, name }: { ns: string; name: string }) {
  const w = useWatch(`${KRT}/namespaces/${ns}/workflowruns`, { fieldSelector: `metadata.name=${name}` });
  const [sel, setSel] = useState('');
  if (w.error) return <Refused error={w.error} what="read this WorkflowRun" />;
  const wfr: Obj | undefined = w.items[0];
  if (!wfr)
    return (
      <Section title={`WorkflowRun ${name}`}>
        {w.synced ? <div class="muted">not found</div> : <Loading synced={false} />}
      </Section>
    );
  const jobs = (wfr.spec?.jobs as Record<string, JobSpec>) ?? {};
  const status = (wfr.status?.jobs as Record<string, Job>) ?? {};
  const phase = wfr.status?.phase ?? 'Pending';
  const chosen = sel || Object.keys(jobs)[0] || '';
  return (
    <>
      <p class="crumbs">
        <a href={href('ns', ns, 'workflows')}>{ns}</a> / WorkflowRun
      </p>
      <Section title={`WorkflowRun ${name}`} actions={<CancelWfr ns={ns} name={name} phase={phase} />}>
        <div class="facts">
          <Phase phase={phase} /> <span>workflow {wfr.metadata.labels?.['workflows.kruntimes.io/workflow'] ?? ''}</span>
        </div>
        {wfr.status?.message && <div class="message">{str(wfr.status.message)}</div>}
      </Section>
      <Section title="Jobs">
        <Dag jobs={jobs} status={status} select={setSel} />
      </Section>
      <Section title="Timeline">
        <Gantt status={status} />
      </Section>
      <Section title={`Job ${chosen}`}>
        <JobDetail ns={ns} name={chosen} job={status[chosen]} />
      </Section>
    </>
  );
}
