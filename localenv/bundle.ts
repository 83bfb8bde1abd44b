/**
 * The components (runtimed, the Runtime Server, the extension server and its functions) start
 * from a JavaScript bundle of cmd/kruntimes.ts instead of TypeScript through tsx, which transforms
 * every module at each start. npm packages stay external (plain JavaScript already; some are
 * native). Code splitting puts each component's modules in their own chunk, so runtimed never
 * loads the extension server's dependencies; every function is an entry of its own that shares
 * the chunks (one instance of each module), found by apiserver/functions.ts. The source maps are written for debugging (node --enable-source-maps)
 * but not loaded by default: loading them costs more CPU at start than the bundle saves.
 * The images' entrypoint (images/kruntimes/bin/kruntimes) and the Lambda handler module
 * (cmd/lambda.mjs) use the bundle when it exists; the local environment rebuilds it on every `up`,
 * the image builds once (`npm run bundle`).
 */
import { build, type Plugin } from 'esbuild';
import { createRequire } from 'node:module';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { REPO_ROOT } from './paths.ts';

export const BUNDLE_DIR = join(REPO_ROOT, 'dist');
export const BUNDLE_FILE = join(BUNDLE_DIR, 'kruntimes.mjs');
/**
 * The watch functions' Lambda handler (cmd/lambda-handler.ts), an entry of its own sharing the
 * chunks: cmd/lambda.mjs, the module aws-lambda-ric loads (lambda/Dockerfile), imports it from here.
 */
export const LAMBDA_FILE = join(BUNDLE_DIR, 'lambda.mjs');
/** Files the Runtime Server opens next to its own module (new URL('./x', import.meta.url)). */
const BESIDE = ['pty-bridge.py', 'function-worker.py'];
/**
 * Directories of functions (<dir>/<name>/index.ts): each function is an entry of its own, written
 * to <outdir>/<dir>/<name>/index.mjs, where apiserver/functions.ts loads it when bundled. The
 * e2e suite's sample functions are bundled when the checkout has them (not in the image).
 */
const FUNCTION_DIRS = ['functions', 'e2e/fixtures/functions'];
/**
 * Node's ES module namespace of a builtin reads every export once, and node:http's lazy
 * WebSocket, CloseEvent and MessageEvent getters load undici (and compile its llhttp WebAssembly):
 * about 10 MiB of RSS in every process that writes `import ... from 'node:http'`, used or not
 * (docs/benchmarks.md, per-Pod memory). The bundle takes node:http from the CommonJS module
 * instead (process.getBuiltinModule), re-exporting its plain values only: an accessor (globalAgent,
 * maxHeaderSize, WebSocket, ...) imported by name fails the build instead of loading undici.
 */
export const HTTP_BUILTIN = /^(node:)?http$/;

export function httpBuiltinSource(): string {
  const http = createRequire(import.meta.url)('node:http') as object;
  const names = Object.entries(Object.getOwnPropertyDescriptors(http))
    .filter(([name, d]) => 'value' in d && /^[A-Za-z_$][\w$]*$/.test(name))
    .map(([name]) => name);
  return [
    "const http = process.getBuiltinModule('node:http');",
    'export default http;',
    `export const { ${names.join(', ')} } = http;`,
    '',
  ].join('\n');
}

/**
 * An ES module import of a CommonJS package makes Node scan the package's source for its export
 * names (cjs-module-lexer, in JavaScript that V8 then optimizes: about 10 MiB of RSS and CPU at
 * every start). The bundle requires such packages instead (createRequire), re-exporting the names
 * the module has when this build loads it. A package that is not CommonJS under `require` stays an
 * import. `pkg` is a bare specifier; undefined when it is left alone.
 */
export function cjsPackageSource(pkg: string, root: string = REPO_ROOT): string | undefined {
  const req = createRequire(join(root, 'package.json'));
  let m: unknown;
  try {
    if (!isCommonJs(req.resolve(pkg))) return undefined;
    m = req(pkg);
  } catch {
    return undefined;
  }
  const names =
    (typeof m === 'object' || typeof m === 'function') && m !== null
      ? Object.keys(m).filter((n) => n !== 'default' && /^[A-Za-z_$][\w$]*$/.test(n))
      : [];
  return [
    "import { createRequire } from 'node:module';",
    `const m = createRequire(import.meta.url)(${JSON.stringify(pkg)});`,
    'export default m;',
    // Through locals: an export name may be a reserved word (express's `static`).
    ...names.map((n, i) => `const e${i} = m[${JSON.stringify(n)}];`),
    ...(names.length ? [`export { ${names.map((n, i) => `e${i} as ${n}`).join(', ')} };`] : []),
    '',
  ].join('\n');
}

/** A file Node loads as CommonJS: .cjs, or .js in a package whose nearest package.json is not "type": "module". */
function isCommonJs(file: string): boolean {
  if (file.endsWith('.cjs')) return true;
  if (!file.endsWith('.js')) return false;
  for (let dir = dirname(file); dir !== dirname(dir); dir = dirname(dir)) {
    const pj = join(dir, 'package.json');
    if (existsSync(pj)) return (JSON.parse(readFileSync(pj, 'utf8')) as { type?: string }).type !== 'module';
  }
  return true;
}

const cjsPackages: Plugin = {
  name: 'krt-cjs-packages',
  setup(b) {
    const sources = new Map<string, string | undefined>();
    const source = (pkg: string): string | undefined => {
      if (!sources.has(pkg)) sources.set(pkg, cjsPackageSource(pkg));
      return sources.get(pkg);
    };
    b.onResolve({ filter: /^[@a-z]/ }, (args) => {
      if (args.path.startsWith('node:') || args.namespace === 'krt-cjs') return undefined;
      return source(args.path) === undefined ? undefined : { path: args.path, namespace: 'krt-cjs' };
    });
    b.onLoad({ filter: /.*/, namespace: 'krt-cjs' }, (args) => ({ contents: source(args.path), loader: 'js' }));
  },
};

const httpBuiltin: Plugin = {
  name: 'krt-http-builtin',
  setup(b) {
    b.onResolve({ filter: HTTP_BUILTIN }, () => ({ path: 'node:http', namespace: 'krt-http-builtin' }));
    b.onLoad({ filter: /.*/, namespace: 'krt-http-builtin' }, () => ({ contents: httpBuiltinSource(), loader: 'js' }));
  },
};

/** Files of an earlier build are removed once no component can still be starting from them. */
const STALE_AFTER_MS = 10 * 60_000;

/**
 * Builds the bundle; each file is written to a temporary name and renamed into place, chunks
 * (content-hashed) before the entries, so a component starting meanwhile never reads half a build.
 * Chunks sit next to the entry: modules that derive the repository root from import.meta.url
 * (one level up) find it from dist/ as from cmd/.
 */
export async function buildBundle(outdir: string = BUNDLE_DIR, now = Date.now()): Promise<string[]> {
  const result = await build({
    entryPoints: {
      kruntimes: join(REPO_ROOT, 'cmd', 'kruntimes.ts'),
      lambda: join(REPO_ROOT, 'cmd', 'lambda-handler.ts'),
      ...functionEntries(),
    },
    outdir,
    outExtension: { '.js': '.mjs' },
    chunkNames: 'chunk-[hash]',
    bundle: true,
    splitting: true,
    platform: 'node',
    target: 'node22',
    format: 'esm',
    packages: 'external',
    sourcemap: true,
    logLevel: 'warning',
    plugins: [httpBuiltin, cjsPackages],
    write: false,
  });
  mkdirSync(outdir, { recursive: true });
  const entry = join(outdir, 'kruntimes.mjs');
  // Chunks first, then the functions' and the Lambda handler's entries, the main entry last.
  const rank = (path: string): number => (path.startsWith(entry) ? 2 : basename(path).startsWith('chunk-') ? 0 : 1);
  const files = [...result.outputFiles].sort((a, b) => rank(a.path) - rank(b.path));
  for (const f of files) {
    mkdirSync(dirname(f.path), { recursive: true });
    const tmp = `${f.path}.${process.pid}.tmp`;
    writeFileSync(tmp, f.contents);
    renameSync(tmp, f.path);
  }
  // Files next to a module (new URL('./x', import.meta.url)) are copied next to the bundle.
  for (const f of BESIDE) copyFileSync(join(REPO_ROOT, 'runtimed', 'runtime-server', f), join(outdir, f));
  const keep = new Set([...files.map((f) => relative(outdir, f.path)), ...BESIDE]);
  removeStale(outdir, outdir, keep, now);
  return files.map((f) => f.path);
}

/** The esbuild entry points of every function: '<dir>/<name>/index' → its source. */
export function functionEntries(root: string = REPO_ROOT): Record<string, string> {
  const out: Record<string, string> = {};
  for (const dir of FUNCTION_DIRS) {
    if (!existsSync(join(root, dir))) continue;
    for (const name of readdirSync(join(root, dir)).sort()) {
      const src = join(root, dir, name, 'index.ts');
      if (existsSync(src)) out[`${dir}/${name}/index`] = src;
    }
  }
  return out;
}

/** Removes files (and, below, function directories) that no entry of this build wrote. */
function removeStale(outdir: string, dir: string, keep: Set<string>, now: number): void {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const st = statSync(path);
    if (st.isDirectory()) {
      removeStale(outdir, path, keep, now);
      if (readdirSync(path).length === 0) rmSync(path, { recursive: true, force: true });
    } else if (!keep.has(relative(outdir, path)) && now - st.mtimeMs > STALE_AFTER_MS) rmSync(path, { force: true });
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
