/** Shared by the dashboard benchmarks: processes, their RSS, the page's JS heap. */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { REPO_ROOT } from '../localenv/paths.ts';

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
