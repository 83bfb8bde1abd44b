/**
 * The plugin step (seed 002 "plugin"): the Controller registers and dispatches one plugin install
 * or removal execution per item of a plugin set frozen when the operation enters the step; the
 * step advances once every item has a result. A failed item is recorded on the Workspace's plugin
 * instance and does not keep the Workspace from being ready. The step is skipped when there is
 * nothing to do (an install_plugin or remove_plugin always has its one plugin; start and restart
 * re-install the Workspace's installed plugins on the new sandbox generation; a create has none).
 */
import { createHash } from 'node:crypto';
import {
  DevwsError,
  type Operation,
  type OperationKind,
  type OperationStatus,
  type Workspace,
  type WorkspaceStatus,
} from './api.ts';

export type PluginItem = NonNullable<OperationStatus['plugins']>[number];
export type PluginInstance = NonNullable<WorkspaceStatus['plugins']>[number];
export type PluginResult = NonNullable<PluginItem['result']>;

/** One execution's result as the Node reports it. */
export interface PluginReportItem {
  id: string;
  result: PluginResult;
  message?: string;
}

/** At most this many plugins per Workspace (the CRD's maxItems). */
export const MAX_PLUGINS = 16;

/** The execution ID of one plugin item: the Node's idempotency key, stable across controller restarts. */
export function pluginExecutionId(
  operationUid: string,
  workspace: string,
  generation: number,
  name: string,
  action: PluginItem['action'],
): string {
  const h = createHash('sha256')
    .update(`${operationUid}\0plugin\0${workspace}\0${generation}\0${name}\0${action}`)
    .digest('hex');
  return `ws-plg-${h.slice(0, 20)}`;
}

type Planned = Omit<PluginItem, 'id' | 'result' | 'message'>;

/** What the plugin step of this operation has to do, before IDs are given. */
export function pluginWork(op: Operation, ws: Workspace): Planned[] {
  const kind = op.spec.kind;
  const p = op.spec.plugin;
  if (kind === 'install_plugin' && p) return [{ name: p.name, action: 'install', manifest: p.manifest ?? '' }];
  if (kind === 'remove_plugin' && p) return [{ name: p.name, action: 'remove' }];
  if (kind !== 'start' && kind !== 'restart') return [];
  return (ws.status?.plugins ?? [])
    .filter((i) => i.state === 'installed')
    .map((i) => ({ name: i.name, action: 'install' as const, manifest: i.manifest ?? '' }));
}

/** Whether the operation has a plugin step at all (the seed: skipped when there is nothing to do). */
export function hasPluginWork(kind: OperationKind, op: Operation, ws: Workspace | undefined): boolean {
  if (kind === 'install_plugin' || kind === 'remove_plugin') return true;
  return ws ? pluginWork(op, ws).length > 0 : false;
}

/** Freezes the plugin set once (an existing one is kept): one execution per item, IDs for this generation. */
export function freezePlugins(s: OperationStatus, op: Operation, ws: Workspace): OperationStatus {
  if (s.plugins) return s;
  const uid = op.metadata.uid ?? op.metadata.name ?? '';
  const gen = ws.status?.runtimeGeneration ?? 0;
  const wsName = ws.metadata.name ?? '';
  const plugins = pluginWork(op, ws).map((p) => ({
    ...p,
    id: pluginExecutionId(uid, wsName, gen, p.name, p.action),
  }));
  return { ...s, plugins };
}

const allowed: Record<PluginItem['action'], PluginResult[]> = {
  install: ['installed', 'failed'],
  remove: ['removed', 'failed'],
};

/**
 * Records the Node's results on the frozen set: only for items of the set, only a result that fits
 * the action, and never over a recorded result (results are immutable: a different one is 409
 * plugin_result_conflict and nothing is recorded).
 */
export function recordPluginResults(s: OperationStatus, results: PluginReportItem[]): OperationStatus {
  const byId = new Map(results.map((r) => [r.id, r]));
  let changed = false;
  const plugins = (s.plugins ?? []).map((item) => {
    const r = byId.get(item.id);
    if (!r || !allowed[item.action].includes(r.result)) return item;
    if (item.result) {
      if (item.result !== r.result)
        throw new DevwsError('plugin_result_conflict', 409, `plugin ${item.name} already ${item.result}`);
      return item;
    }
    changed = true;
    return {
      ...item,
      result: r.result,
      ...(r.result === 'failed' ? { message: (r.message ?? '').slice(0, 1024) } : {}),
    };
  });
  return changed ? { ...s, plugins } : s;
}

/** Every item of the frozen set has a result: the plugin step may advance. */
export function pluginsDone(s: OperationStatus): boolean {
  return (s.plugins ?? []).every((i) => i.result !== undefined);
}

/**
 * The Workspace's plugin instances after the step: an installed item is recorded installed, a
 * failed one failed with its message (on the instance; it does not block readiness), a removed
 * one is dropped. A failed removal leaves the instance as it was.
 */
export function pluginInstancesAfter(ws: WorkspaceStatus, s: OperationStatus, operation: string): PluginInstance[] {
  const out = new Map((ws.plugins ?? []).map((i) => [i.name, i]));
  for (const item of s.plugins ?? []) {
    if (item.result === 'removed') out.delete(item.name);
    if (item.result === 'installed')
      out.set(item.name, { name: item.name, manifest: item.manifest ?? '', state: 'installed', operation });
    if (item.result === 'failed' && item.action === 'install')
      out.set(item.name, {
        name: item.name,
        manifest: item.manifest ?? '',
        state: 'failed',
        message: item.message ?? '',
        operation,
      });
  }
  return [...out.values()];
}

/**
 * A plugin request fits the Workspace: it must be ready (409 workspace_not_ready); a removal needs
 * the plugin on it (409 plugin_not_installed); an install of a new plugin needs room (409
 * too_many_plugins).
 */
export function assertPluginRequest(op: Operation, ws: Workspace): void {
  const st = ws.status ?? {};
  if (st.observedState !== 'ready')
    throw new DevwsError('workspace_not_ready', 409, `${op.spec.kind} needs a ready Workspace`);
  const name = op.spec.plugin?.name ?? '';
  const present = (st.plugins ?? []).some((i) => i.name === name);
  if (op.spec.kind === 'remove_plugin' && !present)
    throw new DevwsError('plugin_not_installed', 409, `plugin ${name} is not on the Workspace`);
  if (op.spec.kind === 'install_plugin' && !present && (st.plugins ?? []).length >= MAX_PLUGINS)
    throw new DevwsError('too_many_plugins', 409, `a Workspace has at most ${MAX_PLUGINS} plugins`);
}
