/**
 * A real OpenSSH server for tests (openssh-server, scripts/setup.sh): git over ssh from the
 * repositories below a directory, for one generated user key, with a generated host key. Each
 * connection to a local TCP port runs `sshd -i` (inetd mode: no daemon, no port to guess) whose
 * only command is `git-shell` (upload-pack of the path the URL names). The test's repositories are
 * addressed by absolute path: `ssh://<user>@<host>:<port><root>/o/r.git`.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

export const SSHD = '/usr/sbin/sshd';

export interface TestSshd {
  host: string;
  port: number;
  user: string;
  /** The user key sshd accepts (OpenSSH private key, PEM text). */
  userKey: string;
  /** A second key sshd does not accept. */
  otherKey: string;
  /** The known_hosts line of this server (`[host]:port type key`), as `ssh-keyscan -p` writes it. */
  knownHosts: string;
  /** A known_hosts line naming this host with a key that is not its own. */
  wrongKnownHosts: string;
  /** ssh://user@host:port<path> */
  url(path: string): string;
  /** How many connections the server has accepted so far. */
  readonly connections: number;
  close(): Promise<void>;
}

function keypair(dir: string, name: string): { key: string; pub: string } {
  const file = join(dir, name);
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', name, '-f', file]);
  return { key: readFileSync(file, 'utf8'), pub: readFileSync(`${file}.pub`, 'utf8').trim() };
}

/** Starts the server on host (default 127.0.0.1) serving git-shell for the current user. */
export async function startTestSshd(host = '127.0.0.1'): Promise<TestSshd> {
  const dir = mkdtempSync(join(tmpdir(), 'krt-sshd-'));
  const hostKey = keypair(dir, 'host');
  const otherHost = keypair(dir, 'other-host');
  const user = keypair(dir, 'user');
  const other = keypair(dir, 'other-user');
  const command = 'git-shell -c "$SSH_ORIGINAL_COMMAND"';
  writeFileSync(join(dir, 'authorized_keys'), `restrict,command="${command.replaceAll('"', '\\"')}" ${user.pub}\n`);
  const me = userInfo().username;
  const config = [
    `HostKey ${join(dir, 'host')}`,
    `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
    `AllowUsers ${me}`,
    'StrictModes no',
    'UsePAM no',
    'PubkeyAuthentication yes',
    'PasswordAuthentication no',
    'KbdInteractiveAuthentication no',
    'PermitRootLogin prohibit-password',
    'AcceptEnv GIT_PROTOCOL',
    'PidFile none',
    'LogLevel ERROR',
  ];
  writeFileSync(join(dir, 'sshd_config'), `${config.join('\n')}\n`);
  // Privilege separation of a root sshd needs its directory (the service creates it; nothing else here does).
  if (process.getuid?.() === 0) mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
  const children = new Set<ChildProcess>();
  let connections = 0;
  const srv = net.createServer((socket) => {
    connections++;
    const child = spawn(SSHD, ['-i', '-e', '-f', join(dir, 'sshd_config')], { stdio: ['pipe', 'pipe', 'ignore'] });
    children.add(child);
    socket.pipe(child.stdin);
    child.stdout.pipe(socket);
    socket.on('error', () => child.kill());
    child.on('exit', () => {
      children.delete(child);
      socket.end();
    });
  });
  await new Promise<void>((resolve) => srv.listen(0, host, () => resolve()));
  const { port } = srv.address() as AddressInfo;
  const known = (pub: string): string => `[${host}]:${port} ${pub.split(' ').slice(0, 2).join(' ')}`;
  return {
    host,
    port,
    user: me,
    userKey: user.key,
    otherKey: other.key,
    knownHosts: `${known(hostKey.pub)}\n`,
    wrongKnownHosts: `${known(otherHost.pub)}\n`,
    url: (path) => `ssh://${me}@${host}:${port}${path}`,
    get connections() {
      return connections;
    },
    close: () =>
      new Promise((resolve) => {
        for (const c of children) c.kill();
        srv.close(() => {
          rmSync(dir, { recursive: true, force: true });
          resolve();
        });
      }),
  };
}
