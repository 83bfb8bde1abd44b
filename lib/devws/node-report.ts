/**
 * The Node's reports (ADR 0020, seed 002 "Node"): the agent in the sandbox Pod writes one
 * annotation on its own Workspace, `dev.kruntimes.io/node-report`, with its registration and
 * heartbeat, the result of the clone execution it was dispatched and its idle proof for an
 * admission epoch. It holds no other write: admission lets only the Node identity of the
 * Workspace's live sandbox Pod change that annotation, and only for the current generation and
 * admission epoch (fenceNodeReport); the controller reads the report back through the same fence.
 */
import { DevwsError, GROUP, type WorkspaceStatus } from './api.ts';
import { assertCurrentNode, registerNode } from './fencing.ts';
import { MAX_PLUGINS, type PluginReportItem } from './plugins.ts';
import { sameJson } from '../kube/same-json.ts';

export const NODE_REPORT = `${GROUP}/node-report`;
/** The namespaced ServiceAccount of every sandbox's Node (bound to the ClusterRole below per namespace). */
export const NODE_SA = 'kruntimes-devws-node';
export const NODE_CLUSTER_ROLE = 'kruntimes:devws-node';
/**
 * An OpenSandbox sandbox's Node authenticates as the ServiceAccount named by its sandbox instance
 * ID (a sandbox_ensure effect ID, `ws-sbx-<hash>`), bound to the same ClusterRole.
 */
export const SANDBOX_SA_PREFIX = 'ws-sbx-';
/** The pod a projected, Pod-bound ServiceAccount token was issued for (TokenRequest boundObjectRef). */
export const POD_NAME_EXTRA = 'authentication.kubernetes.io/pod-name';

export interface CloneReport {
  operation: string;
  attempt: number;
  result: 'succeeded' | 'failed' | 'unknown';
  commit?: string;
  /** Why a failed clone failed (git's last words, one line, at most CLONE_MESSAGE_MAX characters). */
  message?: string;
}

export const CLONE_MESSAGE_MAX = 300;

/** A clone failure's message as a report carries it: one line of printable text, bounded. */
export function cloneMessage(text: string): string {
  // eslint-disable-next-line no-control-regex
  const line = text.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
  return line.length > CLONE_MESSAGE_MAX ? `${line.slice(0, CLONE_MESSAGE_MAX - 1)}…` : line;
}

/** The Node's results of the plugin executions it was dispatched by one operation (ids of its frozen set). */
export interface PluginsReport {
  operation: string;
  results: PluginReportItem[];
}

export interface NodeReportDoc {
  nodeId: string;
  incarnation: string;
  sandboxId: string;
  generation: number;
  heartbeatAt: string;
  clone?: CloneReport;
  idle?: { epoch: number; idle: boolean };
  plugins?: PluginsReport;
}

const isStr = (v: unknown): v is string => typeof v === 'string' && v.length > 0 && v.length <= 253;
const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

function parseClone(c: Partial<CloneReport> | null | undefined): CloneReport | undefined {
  if (c === undefined) return undefined;
  if (!c || !isStr(c.operation) || !isInt(c.attempt)) throw new Error('clone needs operation and attempt');
  if (c.result !== 'succeeded' && c.result !== 'failed' && c.result !== 'unknown') throw new Error('bad clone result');
  if (c.commit !== undefined && !/^[0-9a-f]{40,64}$/.test(c.commit)) throw new Error('bad clone commit');
  if (c.message !== undefined && (typeof c.message !== 'string' || cloneMessage(c.message) !== c.message))
    throw new Error(`clone message must be one line of at most ${CLONE_MESSAGE_MAX} characters`);
  return {
    operation: c.operation,
    attempt: c.attempt,
    result: c.result,
    ...(c.commit ? { commit: c.commit } : {}),
    ...(c.message ? { message: c.message } : {}),
  };
}

const RESULTS = ['installed', 'removed', 'failed'];

function parsePluginItem(i: Partial<PluginReportItem> | null): PluginReportItem {
  if (!i || !isStr(i.id) || !RESULTS.includes(i.result ?? '')) throw new Error('a plugin result needs id and result');
  if (i.message !== undefined && (typeof i.message !== 'string' || i.message.length > 1024))
    throw new Error('bad plugin message');
  return { id: i.id, result: i.result as PluginReportItem['result'], ...(i.message ? { message: i.message } : {}) };
}

function parsePlugins(p: Partial<PluginsReport> | null | undefined): PluginsReport | undefined {
  if (p === undefined) return undefined;
  if (!p || !isStr(p.operation) || !Array.isArray(p.results) || p.results.length > MAX_PLUGINS)
    throw new Error('plugins needs operation and at most 16 results');
  return { operation: p.operation, results: p.results.map((i) => parsePluginItem(i as Partial<PluginReportItem>)) };
}

/** Parses the annotation strictly; anything malformed is 400 invalid_node_report. */
export function parseNodeReport(raw: string): NodeReportDoc {
  try {
    const r = JSON.parse(raw) as Partial<NodeReportDoc> | null;
    if (!r || !isStr(r.nodeId) || !isStr(r.incarnation) || !isStr(r.sandboxId) || !isInt(r.generation))
      throw new Error('nodeId, incarnation, sandboxId and generation are required');
    if (!isStr(r.heartbeatAt) || !Number.isFinite(Date.parse(r.heartbeatAt))) throw new Error('bad heartbeatAt');
    const idle = r.idle;
    if (idle !== undefined && (!idle || !isInt(idle.epoch) || typeof idle.idle !== 'boolean'))
      throw new Error('idle needs epoch and idle');
    const clone = parseClone(r.clone);
    const plugins = parsePlugins(r.plugins);
    return {
      nodeId: r.nodeId,
      incarnation: r.incarnation,
      sandboxId: r.sandboxId,
      generation: r.generation,
      heartbeatAt: r.heartbeatAt,
      ...(clone ? { clone } : {}),
      ...(idle ? { idle: { epoch: idle.epoch, idle: idle.idle } } : {}),
      ...(plugins ? { plugins } : {}),
    };
  } catch (e) {
    throw new DevwsError('invalid_node_report', 400, e instanceof Error ? e.message : String(e));
  }
}

/** The report on a Workspace, or undefined when absent or malformed (a reader never trusts it blindly). */
export function readNodeReport(annotations: Record<string, string> | undefined): NodeReportDoc | undefined {
  const raw = annotations?.[NODE_REPORT];
  if (!raw) return undefined;
  try {
    return parseNodeReport(raw);
  } catch {
    return undefined;
  }
}

export interface FenceContext {
  /** The Workspace's status before the write. */
  ws: WorkspaceStatus;
  /** The pod the writer's token is bound to (undefined: not a Pod-bound token). */
  podName: string | undefined;
  /** The cloneAttempts and frozen baseCommit of the Workspace's current Operation, when it has one. */
  operation?: { name: string; cloneAttempts: number; baseCommit?: string; pluginIds?: string[] };
  /** The report before the write: its unchanged clone and idle parts are not fenced again. */
  previous?: NodeReportDoc;
}

function fenceClone(c: CloneReport, ctx: FenceContext): void {
  const op = ctx.operation;
  if (!op || op.name !== c.operation || op.cloneAttempts !== c.attempt) {
    throw new DevwsError(
      'stale_clone_report',
      409,
      `clone report for ${c.operation} attempt ${c.attempt} is not the current dispatch`,
    );
  }
  if (c.result === 'succeeded' && c.commit !== op.baseCommit) {
    throw new DevwsError(
      'base_commit_mismatch',
      400,
      `clone returned ${c.commit ?? 'no commit'}, the frozen input is ${op.baseCommit ?? 'unset'}`,
    );
  }
}

/** Plugin results only for the current operation's frozen plugin set (409 stale_plugin_report). */
function fencePlugins(p: PluginsReport, ctx: FenceContext): void {
  const op = ctx.operation;
  const ids = op?.name === p.operation ? (op.pluginIds ?? []) : [];
  const foreign = p.results.find((r) => !ids.includes(r.id));
  if (!op || op.name !== p.operation || foreign) {
    throw new DevwsError(
      'stale_plugin_report',
      409,
      `plugin results for ${p.operation}${foreign ? ` (${foreign.id})` : ''} are not of the current plugin step`,
    );
  }
}

/**
 * A Node report may be written only by the Pod it names, for the Workspace's current generation
 * and live sandbox (409 stale_node, stale_sandbox), with an idle proof only for the current
 * admission epoch (409 stale_idle_proof), a clone result only for the current dispatch
 * (409 stale_clone_report, 400 base_commit_mismatch) and plugin results only for the current
 * operation's frozen plugin set (409 stale_plugin_report); a part repeated unchanged from the previous
 * report (a heartbeat) is not fenced again.
 */
export function fenceNodeReport(r: NodeReportDoc, ctx: FenceContext): void {
  if (!ctx.podName || ctx.podName !== r.sandboxId) {
    throw new DevwsError(
      'node_identity_mismatch',
      409,
      `the writer's token is bound to pod ${ctx.podName ?? '(none)'}, not sandbox ${r.sandboxId}`,
    );
  }
  assertCurrentNode(ctx.ws, r);
  if (ctx.ws.sandbox?.nodeId && ctx.ws.sandbox.nodeId !== r.nodeId) {
    throw new DevwsError('stale_node', 409, `node ${r.nodeId} is not the node ensured for the sandbox`);
  }
  if (r.idle && !sameJson(r.idle, ctx.previous?.idle) && r.idle.epoch !== (ctx.ws.admissionEpoch ?? 0)) {
    throw new DevwsError(
      'stale_idle_proof',
      409,
      `idle proof for epoch ${r.idle.epoch}, current is ${ctx.ws.admissionEpoch ?? 0}`,
    );
  }
  if (r.clone && !sameJson(r.clone, ctx.previous?.clone)) fenceClone(r.clone, ctx);
  if (r.plugins && !sameJson(r.plugins, ctx.previous?.plugins)) fencePlugins(r.plugins, ctx);
}

/** The report of the Workspace's current generation and live sandbox, or undefined (absent, malformed or stale). */
export function currentNodeReport(
  ws: WorkspaceStatus,
  annotations: Record<string, string> | undefined,
): NodeReportDoc | undefined {
  const r = readNodeReport(annotations);
  if (!r) return undefined;
  try {
    assertCurrentNode(ws, r);
  } catch {
    return undefined;
  }
  return ws.sandbox?.nodeId && ws.sandbox.nodeId !== r.nodeId ? undefined : r;
}

/** The Node instance a current report registers: its heartbeat is the report's, never later than now. */
export function nodeFromReport(ws: WorkspaceStatus, r: NodeReportDoc, now: Date): WorkspaceStatus {
  const next = registerNode(ws, r, now);
  const beat = Math.min(Date.parse(r.heartbeatAt), now.getTime());
  return { ...next, node: { ...next.node, heartbeatAt: new Date(beat).toISOString() } };
}
