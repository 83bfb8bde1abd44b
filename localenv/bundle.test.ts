import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { buildBundle, cjsPackageSource, functionEntries, httpBuiltinSource } from './bundle.ts';
import { REPO_ROOT } from './paths.ts';
import { R } from '../lib/fn/resources.ts';
import { WIRE_API_VERSION, WIRE_KIND } from '../lib/fn/wire.ts';

/** Files the bundled modules open beside themselves: new URL('./x', import.meta.url). */
function besideFiles(): string[] {
  const files = execFileSync('git', ['ls-files', 'cmd', 'runtimed', 'lib', 'apiserver'], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
  })
    .split('\n')
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'));
  const out: string[] = [];
  for (const f of files)
    for (const m of readFileSync(join(REPO_ROOT, f), 'utf8').matchAll(/new URL\('\.\/([^']+)', import\.meta\.url\)/g))
      out.push(m[1] ?? '');
  return out;
}

/**
 * Runs cmd/lambda.mjs as aws-lambda-ric does (import the module, call `handler` with the event) in a
 * plain node without tsx, from a copy of the Lambda image's layout: cmd/lambda.mjs beside dist/.
 */
function invokeLambda(root: string, event: unknown): string {
  const script = [
    `const { handler } = await import(${JSON.stringify(join(root, 'cmd', 'lambda.mjs'))});`,
    `process.stdout.write('\\nANSWER ' + JSON.stringify(await handler(${JSON.stringify(event)})) + '\\n');`,
  ].join('\n');
  // The handler logs (pino) on stdout too, and a log line may be flushed after the answer: the
  // answer is the line marked as such.
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    encoding: 'utf8',
    env: { ...process.env, NODE_OPTIONS: '', KRT_FUNCTIONS: 'run-scheduler' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const answer = out.split('\n').find((l) => l.startsWith('ANSWER '));
  assert.ok(answer, `no answer line in ${JSON.stringify(out)}`);
  return answer.slice('ANSWER '.length);
}

/**
 * Loaded with --import: at exit, prints the npm packages the process resolved, whether Node
 * loaded undici (which an ES module import of node:http does, for http.WebSocket) and its CommonJS lexer.
 */
const LOADED = `import { registerHooks } from 'node:module';
const seen = new Set();
registerHooks({ resolve(s, c, next) { const r = next(s, c); const m = /node_modules\\/((?:@[^/]+\\/)?[^/]+)/.exec(r.url); if (m) seen.add(m[1]); return r; } });
process.on('exit', () => process.stderr.write('LOADED ' + JSON.stringify({ packages: [...seen].sort(), undici: process.moduleLoadList.some((m) => m.includes('undici')), lexer: process.moduleLoadList.some((m) => m.includes('cjs-module-lexer')) }) + '\\n'));`;

interface Loaded {
  packages: string[];
  stderr: string;
  undici: boolean;
  /** Node scanned a CommonJS module's source for export names (an ES module imported it). */
  lexer: boolean;
}

/** What a bundled command loads: its npm packages and whether undici came with node:http. */
function loaded(dir: string, args: string[], env: Record<string, string> = {}): Loaded {
  const r = spawnSync(
    process.execPath,
    ['--import', `data:text/javascript,${encodeURIComponent(LOADED)}`, join(dir, 'kruntimes.mjs'), ...args],
    { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '', ...env } },
  );
  const line = /^LOADED (.*)$/m.exec(r.stderr)?.[1];
  assert.ok(line, r.stderr);
  return { ...(JSON.parse(line) as Omit<Loaded, 'stderr'>), stderr: r.stderr };
}

/** The Runtime Server from the bundle, until it listens, then SIGTERM: what it loaded meanwhile. */
function runtimeServerLoaded(dir: string, work: string): Promise<Loaded> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      `data:text/javascript,${encodeURIComponent(LOADED)}`,
      join(dir, 'kruntimes.mjs'),
      'runtime-server',
      '--language',
      'bash',
    ],
    { env: { ...process.env, NODE_OPTIONS: '', KRT_RUNTIME_SOCKET: join(work, 'rt.sock') }, stdio: 'pipe' },
  );
  let err = '';
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString();
    // It installs its SIGTERM handler right after this line: leave it the moment to do so.
    if (err.includes('runtime server listening')) setTimeout(() => child.kill('SIGTERM'), 300);
  });
  return new Promise((resolve, reject) => {
    child.on('exit', () => {
      const line = /^LOADED (.*)$/m.exec(err)?.[1];
      if (line) resolve({ ...(JSON.parse(line) as Omit<Loaded, 'stderr'>), stderr: err });
      else reject(new Error(err));
    });
  });
}

describe('per-Pod components bundle', function () {
  this.timeout(60_000);
  // Inside the checkout (ignored), so the bundle resolves its external npm packages.
  let root = '';
  let dir = '';
  before(async () => {
    mkdirSync(join(REPO_ROOT, '.kruntimes'), { recursive: true });
    root = mkdtempSync(join(REPO_ROOT, '.kruntimes', 'bundle-test-'));
    dir = join(root, 'dist');
    await buildBundle(dir);
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it('builds an entry that runs, with every file its modules open beside themselves', () => {
    const beside = besideFiles();
    assert.ok(beside.includes('function-worker.py') && beside.includes('pty-bridge.py'), beside.join(','));
    for (const f of beside) assert.ok(existsSync(join(dir, f)), `${f} beside the bundle`);
    const out = execFileSync(process.execPath, [join(dir, 'kruntimes.mjs'), 'version'], { encoding: 'utf8' });
    assert.match(out, /^kruntimes \d/);
    // Every function (and the e2e suite's samples) loads from the bundle, without tsx.
    const env = { ...process.env, KRT_EXTRA_FUNCTION_DIRS: 'e2e/fixtures/functions', NODE_OPTIONS: '' };
    const listed = execFileSync(process.execPath, [join(dir, 'kruntimes.mjs'), 'fn', 'list'], {
      encoding: 'utf8',
      env,
    });
    const names = listed
      .trim()
      .split('\n')
      .map((l) => l.split(' ')[0]);
    const expected = Object.keys(functionEntries()).map((k) => k.split('/').at(-2));
    assert.ok(expected.includes('run-scheduler') && expected.includes('sample-echo'), expected.join(','));
    assert.deepEqual([...names].sort(), [...expected].sort());
  });

  it("the Lambda image's handler module (cmd/lambda.mjs) runs the bundled handler: no TypeScript, no tsx", () => {
    // Only what lambda/Dockerfile copies: cmd/lambda.mjs and the bundle (no cmd/lambda-handler.ts).
    mkdirSync(join(root, 'cmd'));
    copyFileSync(join(REPO_ROOT, 'cmd', 'lambda.mjs'), join(root, 'cmd', 'lambda.mjs'));
    const request = {
      uid: 'u-1',
      function: 'run-scheduler',
      trigger: { type: 'watch', resource: R.runtimes },
      key: 'ns/bash',
      object: null,
      now: '2026-12-01T10:00:00.000Z',
      reads: [],
    };
    const out = JSON.parse(invokeLambda(root, { apiVersion: WIRE_API_VERSION, kind: WIRE_KIND, request })) as {
      kind: string;
      response: { uid: string; needs?: unknown[] };
    };
    assert.equal(out.kind, WIRE_KIND);
    assert.equal(out.response.uid, 'u-1');
    assert.ok((out.response.needs ?? []).length > 0, JSON.stringify(out));
    // The image runs what it copies: the bundle stage's dist/ and cmd/lambda.mjs, on plain node.
    const dockerfile = readFileSync(join(REPO_ROOT, 'lambda', 'Dockerfile'), 'utf8')
      .split('\n')
      .filter((l) => !l.startsWith('#'))
      .join('\n');
    assert.match(dockerfile, /^COPY cmd\/lambda\.mjs \.\/cmd\/lambda\.mjs$/m);
    assert.match(dockerfile, /^COPY --from=bundle \/src\/dist \.\/dist$/m);
    assert.match(dockerfile, /^ENTRYPOINT \["node", "\/var\/task\/node_modules\/aws-lambda-ric\/index\.mjs"\]$/m);
    assert.doesNotMatch(dockerfile, /tsx/);
  });

  it('takes node:http from the CommonJS builtin: importing it does not load undici (about 5-10 MiB RSS)', () => {
    const src = httpBuiltinSource();
    assert.match(src, /process\.getBuiltinModule\('node:http'\)/);
    assert.match(src, /\bcreateServer\b/);
    assert.doesNotMatch(src, /\bWebSocket\b/);
    // The entry imports node:http (the demo server) at its top: `version` loads it and nothing else.
    const v = loaded(dir, ['version']);
    assert.equal(v.undici, false);
    assert.deepEqual(v.packages, []);
  });

  it('the Runtime Server loads neither pino nor the Kubernetes client of the other components, nor ws until a session', async () => {
    // An invalid --language stops it right after its own modules loaded.
    const v = loaded(dir, ['runtime-server', '--language', 'cobol']);
    assert.ok(!v.packages.includes('pino'), v.packages.join(','));
    assert.ok(!v.packages.includes('@kubernetes/client-node'), v.packages.join(','));
    assert.equal(v.undici, false);
    // Started until it listens: no npm package at all (ws comes with the first session operation).
    const started = await runtimeServerLoaded(dir, root);
    assert.deepEqual(started.packages, []);
    assert.equal(started.lexer, false);
  });

  it('runtimed loads no ws (until a session operation), no prom-client (until a function call) and no X.509 library at start (issue 17)', () => {
    // Outside a Pod (no API server address) runtimed stops right after its modules loaded.
    const work = mkdtempSync(join(root, 'runtimed-'));
    const v = loaded(dir, ['runtimed'], {
      POD_NAME: 'p',
      POD_UID: 'u',
      POD_NAMESPACE: 'ns',
      KRT_RUNTIME: 'rt',
      KRT_RUNTIME_SOCKET: join(work, 'runtime.sock'),
      KUBERNETES_SERVICE_HOST: '',
      KUBECONFIG: '',
    });
    // It got past loading every module of its start: the API client is made last.
    assert.match(v.stderr, /not running in a cluster/);
    assert.ok(v.packages.includes('pino'), v.packages.join(','));
    assert.ok(!v.packages.includes('ws'), v.packages.join(','));
    // prom-client loads with the first function Run, gateway request or scrape (runtimed/lazy-metrics.ts).
    assert.ok(!v.packages.includes('prom-client'), v.packages.join(','));
    assert.ok(!v.packages.some((p) => p.startsWith('@peculiar/') || p.startsWith('asn1')), v.packages.join(','));
    assert.equal(v.undici, false);
    assert.equal(v.lexer, false);
  });

  it('requires CommonJS packages: Node never scans their source for export names (CPU and RSS at start)', () => {
    // Every function loads, as the extension server starts (pino...; ws only with a WebSocket).
    const v = loaded(dir, ['fn', 'list']);
    assert.ok(v.packages.includes('pino'), v.packages.join(','));
    assert.equal(v.lexer, false);
    const src = cjsPackageSource('express');
    assert.match(src ?? '', /createRequire\(import\.meta\.url\)\("express"\)/);
    // A reserved word is exported through a local.
    assert.match(src ?? '', /as static\b/);
    assert.equal(cjsPackageSource('@kubernetes/client-node'), undefined, 'an ES module package stays an import');
  });
});
