/**
 * What a developer workspace's Node does to install or remove a plugin inside its sandbox (the
 * seed's plugin executions, ADR 0020 "Plugins"). A plugin is declarative: its manifest (JSON) and
 * the files it names land in `~/.krt/plugins/<name>/` on the Workspace's data volume, where the
 * sandbox's tools and agent sessions read them; the Node never runs plugin code (it holds the
 * Workspace's only credential). Every execution is keyed by its ID (the controller's frozen plugin
 * set): the install marker `~/.krt/plugins/<name>/.krt-plugin.json` records it, so an execution
 * repeated after a Node restart reports its result without installing again; an install replaces
 * the directory as a whole (written beside it, then renamed), a removal of an absent plugin is
 * done. A bad manifest or a failing write is that item's `failed` result with a message.
 */
import { lstatSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { PluginItem, PluginReportItem } from './plugins.ts';

export const PLUGIN_DIR = join('.krt', 'plugins');
export const PLUGIN_MARKER = '.krt-plugin.json';
const MAX_FILES = 32;
const SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9._-]*$/;
/** The reason a plugin path that is not a real directory is refused with (the message's first word). */
export const UNSAFE_PLUGIN_PATH = 'unsafe_plugin_path';

/** The files a manifest installs besides plugin.json (relative paths, no traversal, no dot-first segment). */
export function manifestFiles(manifest: string): Record<string, string> {
  let doc: unknown;
  try {
    doc = JSON.parse(manifest);
  } catch {
    throw new Error('invalid_plugin_manifest: the manifest is not JSON');
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc))
    throw new Error('invalid_plugin_manifest: the manifest is not a JSON object');
  const files = (doc as { files?: unknown }).files ?? {};
  if (!files || typeof files !== 'object' || Array.isArray(files))
    throw new Error('invalid_plugin_manifest: files must map relative paths to contents');
  const entries = Object.entries(files as Record<string, unknown>);
  if (entries.length > MAX_FILES) throw new Error(`invalid_plugin_manifest: more than ${MAX_FILES} files`);
  for (const [path, content] of entries) {
    if (typeof content !== 'string') throw new Error(`invalid_plugin_manifest: ${path} is not a string`);
    if (path === 'plugin.json' || !path.split('/').every((seg) => SEGMENT.test(seg)))
      throw new Error(`invalid_plugin_manifest: ${JSON.stringify(path)} is not a plain relative path`);
  }
  return Object.fromEntries(entries) as Record<string, string>;
}

/** A directory of the plugin path (relative to the home) that must be a real directory, never a link planted there. */
function realDir(home: string, rel: string): void {
  const path = join(home, rel);
  try {
    if (!lstatSync(path).isDirectory()) throw new Error(`${UNSAFE_PLUGIN_PATH}: ~/${rel} is not a directory`);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    mkdirSync(path, { mode: 0o755 });
  }
}

function pluginsRoot(home: string): string {
  realDir(home, '.krt');
  realDir(home, PLUGIN_DIR);
  return join(home, PLUGIN_DIR);
}

function markerOf(dir: string): string | undefined {
  try {
    const f = join(dir, PLUGIN_MARKER);
    if (!lstatSync(f).isFile()) return undefined;
    return (JSON.parse(readFileSync(f, 'utf8')) as { executionId?: string }).executionId;
  } catch {
    return undefined;
  }
}

function install(home: string, item: PluginItem): PluginReportItem {
  const files = manifestFiles(item.manifest ?? '');
  const root = pluginsRoot(home);
  const dir = join(root, item.name);
  if (markerOf(dir) === item.id) return { id: item.id, result: 'installed' };
  const tmp = join(root, `.tmp-${item.id}`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { mode: 0o755 });
  writeFileSync(join(tmp, 'plugin.json'), item.manifest ?? '');
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(tmp, path)), { recursive: true });
    writeFileSync(join(tmp, path), content);
  }
  writeFileSync(join(tmp, PLUGIN_MARKER), JSON.stringify({ executionId: item.id, name: item.name }));
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  return { id: item.id, result: 'installed' };
}

function remove(home: string, item: PluginItem): PluginReportItem {
  rmSync(join(pluginsRoot(home), item.name), { recursive: true, force: true });
  return { id: item.id, result: 'removed' };
}

/** Runs one plugin execution; any error is the item's failed result (its message, never a secret). */
export function runPluginItem(home: string, item: PluginItem): PluginReportItem {
  try {
    if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(item.name)) throw new Error('invalid plugin name');
    return item.action === 'install' ? install(home, item) : remove(home, item);
  } catch (e) {
    return { id: item.id, result: 'failed', message: (e instanceof Error ? e.message : String(e)).slice(0, 1024) };
  }
}
