/** Discovers the functions: every functions/<name>/index.ts default-exports one FunctionDef. */
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { AdmissionFunction, CronFunction, FunctionDef, WatchFunction } from '../lib/fn/types.ts';

export const FUNCTIONS_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', 'functions');

export async function loadFunctions(dir = FUNCTIONS_DIR): Promise<FunctionDef[]> {
  const out: FunctionDef[] = [];
  for (const name of readdirSync(dir).sort()) {
    const file = join(dir, name, 'index.ts');
    if (!existsSync(file)) continue;
    const mod = (await import(pathToFileURL(file).href)) as { default?: FunctionDef };
    const fn = mod.default;
    if (!fn || fn.name !== name) throw new Error(`${file}: must default-export a FunctionDef named "${name}"`);
    out.push(fn);
  }
  return out;
}

export const watchFunctions = (fs: FunctionDef[]): WatchFunction[] =>
  fs.filter((f): f is WatchFunction => f.trigger.type === 'watch');
export const cronFunctions = (fs: FunctionDef[]): CronFunction[] =>
  fs.filter((f): f is CronFunction => f.trigger.type === 'cron');
export const admissionFunctions = (fs: FunctionDef[]): AdmissionFunction[] =>
  fs.filter((f): f is AdmissionFunction => f.trigger.type === 'admission');
