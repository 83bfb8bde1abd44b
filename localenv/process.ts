/** Detached child processes with their own process group and a log file, plus waiting helpers. */
import { spawn } from 'node:child_process';
import { openSync, closeSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';

export interface SpawnSpec {
  name: string;
  command: string;
  args: string[];
  logFile: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

/** Starts a process in its own process group that outlives its parent; returns its pid. */
export function spawnDetached(spec: SpawnSpec): number {
  mkdirSync(dirname(spec.logFile), { recursive: true });
  const fd = openSync(spec.logFile, 'a');
  try {
    const child = spawn(spec.command, spec.args, {
      detached: true,
      stdio: ['ignore', fd, fd],
      env: spec.env ?? process.env,
      cwd: spec.cwd,
    });
    if (child.pid === undefined) throw new Error(`could not start ${spec.name} (${spec.command})`);
    child.unref();
    return child.pid;
  } finally {
    closeSync(fd);
  }
}

export function isAlive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** SIGTERM the process group, then SIGKILL it after graceMs. */
export async function stopGroup(pid: number | undefined, graceMs = 10_000): Promise<void> {
  if (!pid || !isAlive(pid)) return;
  signalGroup(pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!isAlive(pid)) {
      signalGroup(pid, 'SIGKILL');
      return;
    }
    await sleep(50);
  }
  signalGroup(pid, 'SIGKILL');
  while (isAlive(pid) && Date.now() < deadline + 5000) await sleep(50);
}

function signalGroup(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig);
  } catch {
    try {
      process.kill(pid, sig);
    } catch {
      /* gone */
    }
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Thrown by a waitFor check that knows waiting is pointless (the process it waits for exited). */
export class GiveUp extends Error {
  override name = 'GiveUp';
}

/** Polls check() until it returns true or the deadline passes; reports progress every ~5 s. A
 * check that throws counts as "not yet", except GiveUp, which ends the wait at once. */
export async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
  progress?: (msg: string) => void,
): Promise<void> {
  const start = Date.now();
  let lastReport = start;
  for (;;) {
    const ok = await check().catch((err: unknown) => {
      if (err instanceof GiveUp) throw err;
      return false;
    });
    if (ok) return;
    const now = Date.now();
    if (now - start > timeoutMs)
      throw new Error(`timed out after ${Math.round(timeoutMs / 1000)}s waiting for ${what}`);
    if (progress && now - lastReport > 5000) {
      progress(`still waiting for ${what} (${Math.round((now - start) / 1000)}s)`);
      lastReport = now;
    }
    await sleep(100);
  }
}
