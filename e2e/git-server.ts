/** A local HTTPS git server for tests: git-http-backend (smart HTTP) behind node:https, where Pods reach the host. */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serveGit } from '../runtimed/devws-git-server.ts';
import { E2E_HOST_ADDRESS } from './cluster.ts';

export interface GitServer {
  url: string;
  commit: string;
  /** GIT_PROJECT_ROOT: repository paths below it are served at the same paths. */
  root: string;
  /** Commits these files on top of the branch and publishes it (the external repository moves on): the new commit. */
  push(files: Record<string, string>): string;
  /** Stops serving and removes the repository's directory. */
  close(): void;
}

const git = (args: string[], cwd: string): string =>
  execFileSync('git', args, {
    cwd,
    encoding: 'utf8',
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: 't',
      GIT_AUTHOR_EMAIL: 't@x',
      GIT_COMMITTER_NAME: 't',
      GIT_COMMITTER_EMAIL: 't@x',
    },
  }).trim();

function commitFiles(work: string, files: Record<string, string>): string {
  for (const [name, body] of Object.entries(files)) {
    writeFileSync(join(work, name), body);
    chmodSync(join(work, name), 0o755);
  }
  git(['add', '.'], work);
  git(['commit', '-q', '-m', 'test'], work);
  return git(['rev-parse', 'HEAD'], work);
}

function makeRepo(files: Record<string, string>): { root: string; commit: string } {
  const root = mkdtempSync(join(tmpdir(), 'krt-git-'));
  const work = join(root, 'work');
  execFileSync('git', ['init', '-q', '-b', 'main', work]);
  const commit = commitFiles(work, files);
  execFileSync('git', ['clone', '-q', '--bare', work, join(root, 'repo.git')]);
  git(['config', 'uploadpack.allowAnySHA1InWant', 'true'], join(root, 'repo.git'));
  git(['config', 'http.receivepack', 'false'], join(root, 'repo.git'));
  return { root, commit };
}

export async function startGitServer(
  files: Record<string, string>,
  tls: { cert: Buffer; key: Buffer },
): Promise<GitServer> {
  const { root, commit } = makeRepo(files);
  const srv = https.createServer({ cert: tls.cert, key: tls.key }, (req, res) =>
    serveGit(root, req, res, new URL(req.url ?? '/', 'https://git')),
  );
  await new Promise<void>((r) => srv.listen(0, E2E_HOST_ADDRESS, () => r()));
  const base = `https://${E2E_HOST_ADDRESS}:${(srv.address() as AddressInfo).port}`;
  const push = (more: Record<string, string>): string => {
    const next = commitFiles(join(root, 'work'), more);
    git(['push', '-q', join(root, 'repo.git'), 'main'], join(root, 'work'));
    return next;
  };
  const close = (): void => {
    srv.close();
    rmSync(root, { recursive: true, force: true });
  };
  return { url: `${base}/repo.git`, commit, root, push, close };
}
