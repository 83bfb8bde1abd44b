/**
 * Discovers the functions: every functions/<name>/index.ts default-exports one FunctionDef. Test
 * fixtures add directories with $KRT_EXTRA_FUNCTION_DIRS (colon-separated, relative to the
 * repository root): the e2e suite's sample functions live in e2e/fixtures/functions and are never
 * part of the production manifests (scripts/gen-manifests.ts renders functions/ only).
 * From the JavaScript bundle (localenv/bundle.ts) each function is a bundled module of its own,
 * <bundle>/<dir>/<name>/index.mjs, sharing the bundle's chunks: no TypeScript at run time.
 */
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { AdmissionFunction, CronFunction, FunctionDef, WatchFunction } from '../lib/fn/types.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = resolve(HERE, '..');
/** Running from the bundle: this module is one of its .mjs chunks. */
const BUNDLED = import.meta.url.endsWith('.mjs');
export const FUNCTIONS_DIR = join(REPO_ROOT, 'functions');
export const EXTRA_DIRS_ENV = 'KRT_EXTRA_FUNCTION_DIRS';
/** The ServiceAccount of function <name> is kruntimes-fn-<name> (scripts/gen-manifests.ts renders it). */
export const FUNCTION_SA_PREFIX = 'kruntimes-fn-';
/**
 * The user a function's API calls are made as: its own ServiceAccount, which the extension server
 * impersonates (watch functions' operations and live reads, admission functions' reads and reviews).
 */
export const functionUser = (namespace: string, fn: string): string =>
  `system:serviceaccount:${namespace}:${FUNCTION_SA_PREFIX}${fn}`;

/** functions/ plus the extra directories named in the environment (test fixtures). */
export function functionDirs(env: NodeJS.ProcessEnv = process.env): string[] {
  const extra = (env[EXTRA_DIRS_ENV] ?? '')
    .split(':')
    .map((d) => d.trim())
    .filter(Boolean)
    .map((d) => resolve(REPO_ROOT, d));
  return [FUNCTIONS_DIR, ...extra];
}

/** Where the function modules of a source directory are: itself, or its image in the bundle. */
export function moduleDir(dir: string, bundled = BUNDLED): { dir: string; index: string } {
  return bundled ? { dir: join(HERE, relative(REPO_ROOT, dir)), index: 'index.mjs' } : { dir, index: 'index.ts' };
}

async function loadDir(source: string): Promise<FunctionDef[]> {
  const { dir, index } = moduleDir(source);
  if (!existsSync(dir)) throw new Error(`function directory ${dir} does not exist (${EXTRA_DIRS_ENV})`);
  const out: FunctionDef[] = [];
  for (const name of readdirSync(dir).sort()) {
    const file = join(dir, name, index);
    if (!existsSync(file)) continue;
    const mod = (await import(pathToFileURL(file).href)) as { default?: FunctionDef };
    const fn = mod.default;
    if (!fn || fn.name !== name) throw new Error(`${file}: must default-export a FunctionDef named "${name}"`);
    out.push(fn);
  }
  return out;
}

export async function loadFunctions(dirs: string | string[] = functionDirs()): Promise<FunctionDef[]> {
  const out: FunctionDef[] = [];
  for (const dir of Array.isArray(dirs) ? dirs : [dirs]) {
    for (const fn of await loadDir(dir)) {
      if (out.some((f) => f.name === fn.name)) throw new Error(`${dir}: function "${fn.name}" is defined twice`);
      out.push(fn);
    }
  }
  return out;
}

export const watchFunctions = (fs: FunctionDef[]): WatchFunction[] =>
  fs.filter((f): f is WatchFunction => f.trigger.type === 'watch');
export const cronFunctions = (fs: FunctionDef[]): CronFunction[] =>
  fs.filter((f): f is CronFunction => f.trigger.type === 'cron');
export const admissionFunctions = (fs: FunctionDef[]): AdmissionFunction[] =>
  fs.filter((f): f is AdmissionFunction => f.trigger.type === 'admission');
