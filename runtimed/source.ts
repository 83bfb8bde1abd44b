/**
 * Stages a Run's source in its directory: inline scripts, or a git repository (https/ssh only,
 * shallow fetch of the commit, bounded time and output). Errors name what failed.
 */
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export class PrepareError extends Error {
  readonly reason = 'PrepareSource';
}

export interface Source {
  inline?: string;
  repoURL?: string;
  commitSHA?: string;
  inlinePath?: string;
}

export function checkRepoURL(url: string): void {
  if (/^https:\/\/[^\s]+$/.test(url) || /^ssh:\/\/[^\s]+$/.test(url) || /^[\w.-]+@[\w.-]+:[^\s]+$/.test(url)) return;
  throw new PrepareError(
    `prepare source: git clone: repoURL ${JSON.stringify(url)} is not allowed: use https://, ssh:// or git@host:path`,
  );
}

function git(args: string[], cwd: string, timeoutMs: number, env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(
      'git',
      args,
      { cwd, timeout: timeoutMs, maxBuffer: 64 * 1024, env: { ...env, GIT_TERMINAL_PROMPT: '0' } },
      (err, _stdout, stderr) => {
        if (!err) {
          resolve();
          return;
        }
        const out = String(stderr).trim().slice(-1024);
        reject(
          new PrepareError(
            `prepare source: git ${args[0]}: ${err.killed ? `timed out after ${timeoutMs / 1000}s` : out || err.message}`,
          ),
        );
      },
    );
  });
}

/** Returns the working directory of the Run. */
export async function prepareSource(
  runDir: string,
  source: Source | undefined,
  mode: 'task' | 'function',
  env: NodeJS.ProcessEnv = process.env,
): Promise<string> {
  await mkdir(runDir, { recursive: true, mode: 0o775 });
  if (source?.inline !== undefined) {
    const file = mode === 'function' && source.inlinePath ? join(runDir, source.inlinePath) : join(runDir, 'script');
    await writeFile(file, source.inline, { mode: 0o664 }).catch((e: Error) => {
      throw new PrepareError(`prepare source: write inline: ${e.message}`);
    });
    return runDir;
  }
  if (source?.repoURL) {
    checkRepoURL(source.repoURL);
    const repo = join(runDir, 'repo');
    await mkdir(repo, { recursive: true });
    await git(['init', '-q'], repo, 15_000, env);
    await git(['remote', 'add', 'origin', source.repoURL], repo, 15_000, env);
    const ref = source.commitSHA || 'HEAD';
    await git(['fetch', '-q', '--depth=1', 'origin', ref], repo, 30_000, env);
    await git(['checkout', '-q', 'FETCH_HEAD'], repo, 15_000, env);
    return repo;
  }
  return runDir;
}
