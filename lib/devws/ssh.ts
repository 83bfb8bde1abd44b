/**
 * ssh repositories of the Git Server's sync (ADR 0035), pure: where an `ssh://` or scp-like
 * (`user@host:path`) URL connects, and the ssh command git runs for it. The command reads no
 * configuration file, takes its one identity and its known hosts from files the sync wrote from the
 * credentialRef Secret (the key is never on a command line), checks the host key strictly against
 * those known hosts, and connects to the vetted address only (`HostName`), while the host key is
 * still looked up under the URL's host (`HostKeyAlias`), as `ssh-keyscan` writes it.
 */
/** An scp-like address (user@host:path, no scheme): what validate.ts accepts and ssh connects to. */
export const SCP_LIKE = /^([A-Za-z0-9._-]+)@([A-Za-z0-9.-]+):(?!\/\/)(\S+)$/;

export interface RepositoryEndpoint {
  transport: 'https' | 'ssh';
  /** The URL's host (no brackets around an IPv6 literal). */
  host: string;
  port: number;
}

export const isSshUrl = (url: string): boolean => url.startsWith('ssh://') || SCP_LIKE.test(url);

/** The transport, host and port a repository URL (already validated) connects to. */
export function repositoryEndpoint(url: string): RepositoryEndpoint {
  const scp = SCP_LIKE.exec(url);
  if (scp?.[2]) return { transport: 'ssh', host: scp[2], port: 22 };
  const u = new URL(url);
  const transport = u.protocol === 'ssh:' ? 'ssh' : 'https';
  const port = u.port ? Number(u.port) : transport === 'ssh' ? 22 : 443;
  return { transport, host: u.hostname.replace(/^\[|\]$/g, ''), port };
}

/** The name known_hosts lists the host under: `host`, or `[host]:port` off port 22 (as ssh-keyscan -p writes it). */
export const knownHostsName = (e: RepositoryEndpoint): string => (e.port === 22 ? e.host : `[${e.host}]:${e.port}`);

/**
 * ssh refuses to run for a uid without a passwd entry ("No user exists for uid N"): an image
 * without one for the uid the Pod runs as, or the local environment, whose Pods are host
 * processes (ADR 0036). nss_wrapper (libnss-wrapper) answers the lookup from files the sync writes.
 */
export interface SshUser {
  /** libnss_wrapper.so, preloaded into ssh only. */
  library: string;
  /** The passwd and group files (passwdFiles). */
  passwd: string;
  group: string;
}

/** One passwd and one group line for the uid and gid the sync runs as, home the ssh scratch directory. */
export const passwdFiles = (uid: number, gid: number, home: string): { passwd: string; group: string } => ({
  passwd: `kruntimes:x:${uid}:${gid}:kruntimes:${home}:/usr/sbin/nologin\n`,
  group: `kruntimes:x:${gid}:\n`,
});

export interface SshCommandInput {
  endpoint: RepositoryEndpoint;
  /** The vetted address the connection is pinned to (sync-target.ts). */
  address: string;
  /** The private key file and the known_hosts file the sync wrote (mode 0600, its own directory). */
  keyFile: string;
  knownHostsFile: string;
  /** Set when the sync's uid has no passwd entry: ssh runs under nss_wrapper. */
  user?: SshUser;
}

/** A word for the shell git runs GIT_SSH_COMMAND with. */
const quoted = (s: string): string => `'${s.replaceAll("'", `'\\''`)}'`;

/** GIT_SSH_COMMAND: no config file, one identity, strict host key checking, the pinned address, no prompts. */
export function sshCommand(i: SshCommandInput): string {
  const options: [string, string][] = [
    ['BatchMode', 'yes'],
    ['IdentitiesOnly', 'yes'],
    ['IdentityFile', i.keyFile],
    ['UserKnownHostsFile', i.knownHostsFile],
    ['GlobalKnownHostsFile', '/dev/null'],
    ['StrictHostKeyChecking', 'yes'],
    ['UpdateHostKeys', 'no'],
    ['CheckHostIP', 'no'],
    ['HostKeyAlias', knownHostsName(i.endpoint)],
    ['HostName', i.address],
    ['ProxyCommand', 'none'],
    ['ProxyJump', 'none'],
    ['ForwardAgent', 'no'],
    ['ClearAllForwardings', 'yes'],
    ['PasswordAuthentication', 'no'],
    ['KbdInteractiveAuthentication', 'no'],
    ['ConnectTimeout', '30'],
    ['LogLevel', 'ERROR'],
  ];
  const u = i.user;
  const env = u
    ? [
        `LD_PRELOAD=${quoted(u.library)}`,
        `NSS_WRAPPER_PASSWD=${quoted(u.passwd)}`,
        `NSS_WRAPPER_GROUP=${quoted(u.group)}`,
      ]
    : [];
  return [...env, 'ssh', '-F', '/dev/null', ...options.map(([k, v]) => `-o ${quoted(`${k}=${v}`)}`)].join(' ');
}
