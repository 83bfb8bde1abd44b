/**
 * Shared by the dashboard benchmarks (bench/dashboard.ts, bench/dashboard-soak.ts): their own
 * local environment and headless Debian chromium, `krt dashboard` as a process of its own,
 * signing the page in, processes' RSS and the page's JS heap.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { down, up, type Env } from '../localenv/environment.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import { buildUi } from '../scripts/build-ui.ts';

/** A process's resident memory, MiB; NaN once it has exited. */
export function rssMiB(pid: number): number {
  try {
    const kib = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return Number(kib ?? NaN) / 1024;
  } catch {
    return NaN;
  }
}

/** Starts a process and resolves with it once `ready` matches its stdout (at once without one). */
export function startProcess(
  cmd: string,
  args: string[],
  ready: RegExp | undefined,
  onLine: (l: string) => void,
): Promise<ChildProcess> {
  const child = spawn(cmd, args, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  let buf = '';
  return new Promise((resolve, reject) => {
    if (!ready) resolve(child);
    child.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      const lines = buf.split('\n');
      buf = lines.pop() ?? '';
      for (const l of lines) {
        onLine(l);
        if (ready?.test(l)) resolve(child);
      }
    });
    child.on('exit', (code) => reject(new Error(`${cmd} exited ${code}`)));
  });
}

/** The page's JS heap in use (Chromium's Performance domain), MiB. */
export async function heapMiB(page: Page): Promise<number> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('HeapProfiler.collectGarbage');
  // Without Performance.enable the metrics list is empty.
  const { usedSize } = await cdp.send('Runtime.getHeapUsage');
  await cdp.detach();
  return usedSize / 2 ** 20;
}

export interface DashboardBench {
  env: Env;
  browser: Browser;
  /** Processes to stop (SIGINT) when the benchmark ends. */
  started: ChildProcess[];
}

/**
 * Builds the UI, starts a local environment of one node under .kruntimes/bench/<name>-<pid> and
 * headless chromium, runs `body`, then stops every process it started and purges the environment
 * (also when the start itself failed half-way).
 */
export async function withDashboardBench(name: string, body: (b: DashboardBench) => Promise<void>): Promise<void> {
  await buildUi();
  const root = join(REPO_ROOT, '.kruntimes', 'bench', `${name}-${process.pid}`);
  const env = await up({
    root,
    nodes: ['bench-a'],
    ...(process.env.KRT_BIN_DIR ? { binDir: process.env.KRT_BIN_DIR } : {}),
  }).catch(async (err: unknown) => {
    await down(root, { purge: true }).catch(() => undefined);
    throw err;
  });
  const b: DashboardBench = { env, browser: undefined as unknown as Browser, started: [] };
  try {
    b.browser = await chromium.launch({
      executablePath: process.env.KRT_CHROMIUM ?? '/usr/bin/chromium',
      args: ['--no-sandbox'],
    });
    await body(b);
  } finally {
    await b.browser?.close();
    for (const p of b.started) p.kill('SIGINT');
    env.admin.close();
    await down(root, { purge: true });
  }
}

/** `krt dashboard` as its own process for `kubeconfig`, namespace `ns`, with the login address it printed. */
export async function startKrtDashboard(
  b: DashboardBench,
  kubeconfig: string,
  ns: string,
): Promise<{ process: ChildProcess; loginUrl: string }> {
  let loginUrl = '';
  const args = ['dashboard', '--no-open', '--kubeconfig', kubeconfig, '-n', ns];
  const child = await startProcess(join(REPO_ROOT, 'bin', 'krt'), args, /open http/, (l) => {
    loginUrl = /open (\S+)/.exec(l)?.[1] ?? loginUrl;
  });
  b.started.push(child);
  return { process: child, loginUrl };
}

/** Signs `page` in with the login address and opens the dashboard at `hash` (e.g. #/ns/x/runs). */
export async function signIn(page: Page, loginUrl: string, hash: string): Promise<void> {
  await page.goto(loginUrl);
  await page.goto(`${new URL(loginUrl).origin}/${hash}`);
}

/** Runs a benchmark's main; a failure is printed with its stack and exits 1. */
export function benchMain(main: () => Promise<void>): void {
  main().catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
