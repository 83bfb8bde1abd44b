/**
 * A devws Git Server in a process of its own, for tests that run it as another uid (the
 * component's 65532, which has no passwd entry on the test host, as on the local environment):
 * `setpriv --reuid=65532 ... node --import tsx runtimed/testdata/git-server-as-user.ts <config>`.
 * The config file (JSON) gives its root, TLS pair, sync token, allowed targets and the one Project
 * and credential Secret its authority answers; no token is ever authenticated (syncs only). It
 * prints `{"url": ...}` once it listens and runs until its standard input closes.
 */
import { readFileSync } from 'node:fs';
import type { Project } from '../../lib/devws/api.ts';
import type { CredentialSecret } from '../../lib/devws/credential.ts';
import { parseCidrList } from '../../lib/devws/sync-target.ts';
import type { GitAuthority } from '../devws-git-authority.ts';
import { startGitServer } from '../devws-git-server.ts';

export interface GitServerAsUserConfig {
  root: string;
  cert: string;
  key: string;
  syncToken: string;
  allow: string;
  project: Project;
  secret: CredentialSecret;
}

const cfg = JSON.parse(readFileSync(process.argv[2] ?? '', 'utf8')) as GitServerAsUserConfig;
const ns = cfg.project.metadata.namespace ?? '';
const authority: GitAuthority = {
  review: () => Promise.resolve(undefined),
  mayRead: () => Promise.resolve(false),
  workspaces: () => Promise.resolve([]),
  project: (namespace, name) =>
    Promise.resolve(namespace === ns && name === cfg.project.metadata.name ? cfg.project : undefined),
  secret: () => Promise.resolve({ secret: cfg.secret }),
};
const server = await startGitServer({
  root: cfg.root,
  cert: cfg.cert,
  key: cfg.key,
  syncToken: cfg.syncToken,
  authority,
  host: '127.0.0.1',
  targets: { allow: parseCidrList(cfg.allow), deny: [] },
});
process.stdout.write(`${JSON.stringify({ url: server.url })}\n`);
process.stdin.resume();
process.stdin.on('end', () => void server.close().then(() => process.exit(0)));
