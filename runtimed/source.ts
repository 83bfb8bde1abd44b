/**
 * Stages a Run's source in its directory: inline scripts, or a git repository (https/ssh only,
 * shallow fetch of the commit, bounded time and output). Errors name what failed.
 */
import { execFile } from 'node:child_process';
import { constants } from 'node:fs';
import { join } from 'node:path';
import { closeFd, drive, op, type Walk } from './artifacts/fs-ops.ts';
import { isComponent, openDirBeneath, type DirHandle } from './artifacts/safe-dir.ts';
import { runtimedGitVar } from '../lib/run/template-policy.ts';

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

/** commitSHA is a full or abbreviated hex object name; anything else (an option, a refspec) is refused. */
export function checkCommitSHA(sha: string | undefined): void {
  if (sha === undefined || sha === '' || /^[0-9a-f]{7,64}$/i.test(sha)) return;
  throw new PrepareError(
    `prepare source: commitSHA ${JSON.stringify(sha.slice(0, 80))} is not a hexadecimal commit id (7 to 64 hex digits)`,
  );
}

/** Process basics git needs; everything else of runtimed's environment (the artifact store's
 * credentials, the Pod's identity) stays out of git and every program git may start. */
const GIT_BASE_ENV = ['PATH', 'HOME', 'TMPDIR', 'LANG', 'LC_ALL', 'SSL_CERT_FILE', 'SSL_CERT_DIR'];
const PROXY_ENV = /^(https?_proxy|no_proxy|all_proxy)$/i;

/** The environment of runtimed's git: basics, proxies and the TLS/HTTP GIT_* settings only. */
export function gitProcessEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) continue;
    if (GIT_BASE_ENV.includes(name) || PROXY_ENV.test(name) || runtimedGitVar({ name, value })) out[name] = value;
  }
  return out;
}

function git(args: string[], cwd: string, timeoutMs: number, env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(
      'git',
      args,
      { cwd, timeout: timeoutMs, maxBuffer: 64 * 1024, env: { ...gitProcessEnv(env), GIT_TERMINAL_PROMPT: '0' } },
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

/** The file an inline source is written to, as segments below the Run directory. */
export function inlineFileSegments(source: Source, mode: 'task' | 'function'): string[] {
  if (mode !== 'function' || !source.inlinePath) return ['script'];
  const segments = source.inlinePath.split('/').filter((s) => s !== '' && s !== '.');
  if (segments.length === 0 || segments.some((s) => !isComponent(s))) {
    throw new PrepareError(
      `prepare source: inlinePath ${JSON.stringify(source.inlinePath)} must be a relative path without '..' segments`,
    );
  }
  return segments;
}

/** Creates (or truncates) `name` below `dir` and writes `content`, never through a link or into a FIFO. */
function* writeFileWalk(dir: DirHandle, name: string, content: string): Walk<void> {
  const flags =
    constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW | constants.O_NONBLOCK;
  const fd = yield* op.open(`${dir.path}/${name}`, flags, 0o664);
  try {
    if (!(yield* op.fstat(fd)).isFile()) throw new Error('not a regular file');
    yield* op.write(fd, Buffer.from(content, 'utf8'));
  } finally {
    closeFd(fd);
  }
}

async function writeInline(dir: DirHandle, segments: string[], content: string): Promise<void> {
  const parent = segments.length > 1 ? await openDirBeneath(dir, segments.slice(0, -1), { create: 0o775 }) : dir;
  try {
    if (!parent) throw new Error('the parent directory could not be opened');
    await drive(writeFileWalk(parent, segments[segments.length - 1] as string, content));
  } catch (e) {
    throw new PrepareError(
      `prepare source: write inline: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
    );
  } finally {
    if (parent && parent !== dir) await parent.close().catch(() => undefined);
  }
}

/**
 * Stages the source into the Run directory, open as `dir` (its real path is `runDir`, which is
 * what the Run sees). Files are written relative to `dir` without following links. Returns the
 * working directory of the Run.
 */
export async function prepareSource(
  dir: DirHandle,
  runDir: string,
  source: Source | undefined,
  mode: 'task' | 'function',
  env: NodeJS.ProcessEnv = process.env,
): Promise<string> {
  if (source?.inline !== undefined) {
    await writeInline(dir, inlineFileSegments(source, mode), source.inline);
    return runDir;
  }
  if (source?.repoURL) {
    checkRepoURL(source.repoURL);
    checkCommitSHA(source.commitSHA);
    await (await openDirBeneath(dir, ['repo'], { create: 0o775 }))?.close();
    const repo = join(runDir, 'repo');
    await git(['init', '-q'], repo, 15_000, env);
    await git(['remote', 'add', 'origin', source.repoURL], repo, 15_000, env);
    const ref = source.commitSHA || 'HEAD';
    await git(['fetch', '-q', '--depth=1', 'origin', '--end-of-options', ref], repo, 30_000, env);
    await git(['checkout', '-q', 'FETCH_HEAD'], repo, 15_000, env);
    return repo;
  }
  return runDir;
}
