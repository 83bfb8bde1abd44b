/**
 * The decisions of a developer workspace's Node agent (`kruntimes devws-node`, ADR 0020), pure:
 * from its own Workspace and current Operation (read with its Pod-bound token) it decides whether
 * it is still the live instance, which clone to run, which plugins to install or remove, which idle
 * proof to give and when to renew its heartbeat. Everything it says goes into one report
 * (lib/devws/node-report.ts).
 */
import type { CloneInput, Operation, Workspace } from './api.ts';
import type { CloneReport, NodeReportDoc } from './node-report.ts';
import type { PluginItem } from './plugins.ts';
import { requestedRefOf } from './validate.ts';

/** A heartbeat every 10 s keeps the Node well inside the controller's 30 s window. */
export const HEARTBEAT_EVERY_MS = 10_000;

export interface NodeSelf {
  nodeId: string;
  incarnation: string;
  sandboxId: string;
  generation: number;
}

/** What the local journal knows of a clone dispatch: nothing, started (and never finished), or its result. */
export type JournalEntry = { state: 'none' } | { state: 'started' } | { state: 'done'; clone: CloneReport };

export interface NodeView {
  self: NodeSelf;
  ws: Workspace;
  op?: Operation;
  /** The report this instance wrote last (or the one on the Workspace at start, if it is this sandbox's). */
  last?: NodeReportDoc;
  now: Date;
  journal: (operation: string, attempt: number) => JournalEntry;
  /** Whether anything still runs in the sandbox (an agent session, an execution). */
  busy: boolean;
}

export type NodeAction =
  | { kind: 'stale'; why: string }
  | {
      kind: 'clone';
      operation: string;
      attempt: number;
      input: CloneInput;
      /** The Git Server's CA as the Operation carries it now (unset: the Node's own trust). */
      ca?: string;
      localBranch: string;
      base: NodeReportDoc;
    }
  | { kind: 'plugins'; operation: string; items: PluginItem[]; base: NodeReportDoc }
  | { kind: 'report'; report: NodeReportDoc }
  | { kind: 'none' };

/** A later generation or another sandbox: this instance is fenced and must stop writing. */
export function staleness(self: NodeSelf, ws: Workspace): string | undefined {
  const st = ws.status ?? {};
  if ((st.runtimeGeneration ?? 0) !== self.generation)
    return `generation ${self.generation} is not current (${st.runtimeGeneration ?? 0})`;
  if (st.sandbox?.id !== self.sandboxId || st.sandbox.terminated)
    return `sandbox ${self.sandboxId} is not the Workspace's live sandbox`;
  return undefined;
}

/** The clone dispatch of the current Operation: running on step clone, input frozen, result not unknown. */
export function cloneDispatch(
  ws: Workspace,
  op: Operation | undefined,
): { attempt: number; input: CloneInput; ca?: string } | undefined {
  const s = op?.status;
  if (!op || op.metadata.name !== ws.status?.operation?.name || !s) return undefined;
  if (s.state !== 'running' || s.step !== 'clone' || !s.cloneInput || s.cloneUnknown) return undefined;
  return { attempt: s.cloneAttempts ?? 0, input: s.cloneInput, ...(s.gitServerCA ? { ca: s.gitServerCA } : {}) };
}

function cloneAction(v: NodeView, base: NodeReportDoc): NodeAction | undefined {
  const d = cloneDispatch(v.ws, v.op);
  const name = v.op?.metadata.name ?? '';
  if (!d || (v.last?.clone?.operation === name && v.last.clone.attempt === d.attempt)) return undefined;
  const j = v.journal(name, d.attempt);
  if (j.state === 'done') return { kind: 'report', report: { ...base, clone: j.clone } };
  // Started and never finished (this Node restarted mid-clone): the result is unknown, never re-run.
  if (j.state === 'started')
    return { kind: 'report', report: { ...base, clone: { operation: name, attempt: d.attempt, result: 'unknown' } } };
  // From the frozen input, not the Workspace: the Node reads its Workspace, then the Operation, and
  // a Workspace read before the node step's write has no requestedRef yet (an empty branch name
  // failed the attempt and cost a retry).
  const localBranch = requestedRefOf(d.input.workspaceBranch, v.ws.metadata.name ?? '');
  if (!localBranch) return undefined;
  const ca = d.ca ? { ca: d.ca } : {};
  return { kind: 'clone', operation: name, attempt: d.attempt, input: d.input, ...ca, localBranch, base };
}

/** The plugin executions of the current Operation: running on step plugin with its set frozen. */
export function pluginDispatch(ws: Workspace, op: Operation | undefined): PluginItem[] | undefined {
  const s = op?.status;
  if (!op || op.metadata.name !== ws.status?.operation?.name || !s) return undefined;
  if (s.state !== 'running' || s.step !== 'plugin' || !s.plugins) return undefined;
  return s.plugins;
}

/** The items of the dispatch this instance has not reported yet (the controller records what it reported). */
function pluginAction(v: NodeView, base: NodeReportDoc): NodeAction | undefined {
  const items = pluginDispatch(v.ws, v.op);
  const operation = v.op?.metadata.name ?? '';
  if (!items) return undefined;
  const done = v.last?.plugins?.operation === operation ? v.last.plugins.results.map((r) => r.id) : [];
  const todo = items.filter((i) => !i.result && !done.includes(i.id));
  return todo.length > 0 ? { kind: 'plugins', operation, items: todo, base } : undefined;
}

/** While a stop, restart or delete quiesces the Workspace: one idle proof per admission epoch. */
function idleAction(v: NodeView, base: NodeReportDoc): NodeAction | undefined {
  const st = v.ws.status ?? {};
  if (st.admissionOpen !== false || st.observedState !== 'stopping') return undefined;
  const epoch = st.admissionEpoch ?? 0;
  if (v.last?.idle?.epoch === epoch) return undefined;
  return { kind: 'report', report: { ...base, idle: { epoch, idle: !v.busy } } };
}

export function decideNode(v: NodeView): NodeAction {
  const why = staleness(v.self, v.ws);
  if (why) return { kind: 'stale', why };
  const base: NodeReportDoc = {
    ...v.self,
    heartbeatAt: v.now.toISOString(),
    ...(v.last?.clone ? { clone: v.last.clone } : {}),
    ...(v.last?.idle ? { idle: v.last.idle } : {}),
    ...(v.last?.plugins ? { plugins: v.last.plugins } : {}),
  };
  const act = cloneAction(v, base) ?? pluginAction(v, base) ?? idleAction(v, base);
  if (act) return act;
  const beat = Date.parse(v.last?.heartbeatAt ?? '');
  const due = !v.last || v.last.incarnation !== v.self.incarnation || !(v.now.getTime() - beat < HEARTBEAT_EVERY_MS);
  return due ? { kind: 'report', report: base } : { kind: 'none' };
}
