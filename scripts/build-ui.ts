/**
 * Builds the dashboard bundle: ui/main.tsx → ui/dist/app.js (esbuild, minified, one file, no
 * CDN), with ui/index.html and ui/app.css copied next to it. Run by scripts/setup.sh; well under
 * a second. `--if-stale` skips the build when ui/dist is newer than every source.
 */
import { copyFileSync, existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';
import { REPO_ROOT } from '../localenv/paths.ts';

const UI = join(REPO_ROOT, 'ui');
const OUT = join(UI, 'dist');

function stale(): boolean {
  const out = join(OUT, 'app.js');
  if (!existsSync(out)) return true;
  const built = statSync(out).mtimeMs;
  return readdirSync(UI).some((f) => f !== 'dist' && statSync(join(UI, f)).mtimeMs > built);
}

export async function buildUi(opts: { ifStale?: boolean } = {}): Promise<void> {
  if (opts.ifStale && !stale()) return;
  mkdirSync(OUT, { recursive: true });
  await build({
    entryPoints: [join(UI, 'main.tsx')],
    outfile: join(OUT, 'app.js'),
    bundle: true,
    minify: true,
    format: 'esm',
    target: 'es2022',
    jsx: 'automatic',
    jsxImportSource: 'preact',
    legalComments: 'linked',
    logLevel: 'warning',
  });
  copyFileSync(join(UI, 'index.html'), join(OUT, 'index.html'));
  copyFileSync(join(UI, 'app.css'), join(OUT, 'app.css'));
}

// No top-level await: the e2e spec imports this module, and mocha may load it through require().
if (import.meta.url === `file://${process.argv[1]}`)
  buildUi({ ifStale: process.argv.includes('--if-stale') }).catch((err: unknown) => {
    process.stderr.write(`build-ui: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
