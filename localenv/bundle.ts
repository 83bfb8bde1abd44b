/**
 * The per-Pod components (runtimed, the Runtime Server) start from a JavaScript bundle of
 * cmd/kruntimes.ts instead of TypeScript through tsx, which transforms every module at each
 * start. npm packages stay external (plain JavaScript already; some are native). Code splitting
 * puts each component's modules in their own chunk, so runtimed never loads the extension
 * server's dependencies. The source maps are written for debugging (node --enable-source-maps)
 * but not loaded by default: loading them costs more CPU at start than the bundle saves.
 * The images' entrypoint (images/kruntimes/bin/kruntimes) uses the bundle when it exists; the
 * local environment rebuilds it on every `up`, the image build once (`npm run bundle`).
 */
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { REPO_ROOT } from './paths.ts';

export const BUNDLE_DIR = join(REPO_ROOT, 'dist');
export const BUNDLE_FILE = join(BUNDLE_DIR, 'kruntimes.mjs');
/** Files the Runtime Server opens next to its own module (new URL('./x', import.meta.url)). */
const BESIDE = ['pty-bridge.py', 'function-worker.py'];
/** Files of an earlier build are removed once no component can still be starting from them. */
const STALE_AFTER_MS = 10 * 60_000;

/**
 * Builds the bundle; each file is written to a temporary name and renamed into place, chunks
 * (content-hashed) before the entry, so a component starting meanwhile never reads half a build.
 * Chunks sit next to the entry: modules that derive the repository root from import.meta.url
 * (one level up) find it from dist/ as from cmd/.
 */
export async function buildBundle(outdir: string = BUNDLE_DIR, now = Date.now()): Promise<string[]> {
  const result = await build({
    entryPoints: [join(REPO_ROOT, 'cmd', 'kruntimes.ts')],
    outdir,
    outExtension: { '.js': '.mjs' },
    entryNames: '[name]',
    chunkNames: 'chunk-[hash]',
    bundle: true,
    splitting: true,
    platform: 'node',
    target: 'node22',
    format: 'esm',
    packages: 'external',
    sourcemap: true,
    logLevel: 'warning',
    write: false,
  });
  mkdirSync(outdir, { recursive: true });
  const entry = join(outdir, 'kruntimes.mjs');
  const files = [...result.outputFiles].sort(
    (a, b) => Number(a.path.startsWith(entry)) - Number(b.path.startsWith(entry)),
  );
  for (const f of files) {
    const tmp = `${f.path}.${process.pid}.tmp`;
    writeFileSync(tmp, f.contents);
    renameSync(tmp, f.path);
  }
  // Files next to a module (new URL('./x', import.meta.url)) are copied next to the bundle.
  for (const f of BESIDE) copyFileSync(join(REPO_ROOT, 'runtimed', 'runtime-server', f), join(outdir, f));
  const keep = new Set([...files.map((f) => basename(f.path)), ...BESIDE]);
  removeStale(outdir, keep, now);
  return files.map((f) => f.path);
}

function removeStale(dir: string, keep: Set<string>, now: number): void {
  for (const name of readdirSync(dir)) {
    if (keep.has(name)) continue;
    const path = join(dir, name);
    if (now - statSync(path).mtimeMs > STALE_AFTER_MS) rmSync(path, { force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  buildBundle().then(
    () => process.stdout.write(`${BUNDLE_FILE}\n`),
    (err: unknown) => {
      process.stderr.write(`bundle: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}
