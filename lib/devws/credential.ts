/**
 * A Project's repository credential (seed 002 "仓库凭据"), pure. `spec.repository.credentialRef`
 * names a Secret of the Project's namespace: a reference only, never a value in the Project. Only
 * the Git Server's sync (the seed's Repo Executor) reads it, with its own identity and only where
 * the namespace granted it `get` on that Secret by name; Nodes, the controller and the frozen
 * clone input never see it. An https repository takes a `kubernetes.io/basic-auth` Secret
 * (`username`, `password`: a password or an access token), sent as an Authorization header that
 * git gets from its environment (never the URL, the command line, a config file or a log). An ssh
 * repository takes a `kubernetes.io/ssh-auth` Secret (`ssh-privatekey`, and `known_hosts`: the
 * host keys ssh checks strictly; ADR 0035), written to files only ssh reads, for one fetch.
 */
import { GitAccessError } from './git-access.ts';
import { isSshUrl } from './ssh.ts';

export const BASIC_AUTH = 'kubernetes.io/basic-auth';
export const SSH_AUTH = 'kubernetes.io/ssh-auth';
/** The key of an ssh-auth Secret that holds the host keys (known_hosts lines) of the repository's host. */
export const KNOWN_HOSTS_KEY = 'known_hosts';

export interface CredentialSecret {
  type?: string;
  data?: Record<string, string>;
}

/** The Git Server's read of the Secret: found, absent, or not granted to it. */
export type SecretRead = { secret: CredentialSecret } | { missing: 'not_found' | 'forbidden' };

export type GitCredential =
  { kind: 'basic'; username: string; password: string } | { kind: 'ssh'; privateKey: string; knownHosts: string };

const decoded = (s: CredentialSecret, key: string): string =>
  Buffer.from(s.data?.[key] ?? '', 'base64').toString('utf8');

const invalid = (where: string, why: string): GitAccessError =>
  new GitAccessError('credential_invalid', 422, `the credentialRef Secret ${where} ${why}`);

/** The cipher an OpenSSH-format key ("openssh-key-v1") is encrypted with; "none": not encrypted. */
function opensshCipher(pem: string): string | undefined {
  const body = /-----BEGIN OPENSSH PRIVATE KEY-----([\s\S]*?)-----END OPENSSH PRIVATE KEY-----/.exec(pem)?.[1];
  if (!body) return undefined;
  const bytes = Buffer.from(body.replace(/\s+/g, ''), 'base64');
  const magic = 'openssh-key-v1\0';
  if (bytes.length < magic.length + 4 || bytes.toString('latin1', 0, magic.length) !== magic) return undefined;
  const len = bytes.readUInt32BE(magic.length);
  return bytes.toString('latin1', magic.length + 4, magic.length + 4 + len);
}

/**
 * Whether a private key needs a passphrase: an OpenSSH key with a cipher, an encrypted PKCS#8 key,
 * or a PEM key with `Proc-Type: 4,ENCRYPTED`. The sync cannot enter one (ssh runs in batch mode).
 */
export function keyNeedsPassphrase(pem: string): boolean {
  const cipher = opensshCipher(pem);
  if (cipher !== undefined) return cipher !== 'none';
  return /-----BEGIN ENCRYPTED PRIVATE KEY-----/.test(pem) || /^Proc-Type:\s*4,ENCRYPTED\s*$/m.test(pem);
}

function sshCredential(where: string, s: CredentialSecret): GitCredential {
  if (s.type !== SSH_AUTH)
    throw invalid(where, `must be of type ${SSH_AUTH} for an ssh repository (it is ${s.type ?? 'untyped'})`);
  const privateKey = decoded(s, 'ssh-privatekey');
  if (!privateKey.trim()) throw invalid(where, 'has no ssh-privatekey');
  if (keyNeedsPassphrase(privateKey))
    throw new GitAccessError(
      'credential_passphrase_unsupported',
      422,
      `the credentialRef Secret ${where} holds a passphrase-protected ssh-privatekey: the sync cannot enter a passphrase; store the key without one (ssh-keygen -p -N '')`,
    );
  const knownHosts = decoded(s, KNOWN_HOSTS_KEY);
  if (!knownHosts.trim())
    throw invalid(where, `has no ${KNOWN_HOSTS_KEY}: the host key of the repository's host is required (ssh-keyscan)`);
  return { kind: 'ssh', privateKey: privateKey.endsWith('\n') ? privateKey : `${privateKey}\n`, knownHosts };
}

/**
 * The credential a sync of `url` uses (422 failures a user fixes, then syncs again):
 * credential_not_found, credential_forbidden (the namespace has not granted the Git Server `get`
 * on it), credential_invalid (an https repository needs a basic-auth Secret with a password, an
 * ssh repository an ssh-auth Secret with a private key and known_hosts),
 * credential_passphrase_unsupported (an ssh key that needs a passphrase).
 */
export function credentialOf(where: string, read: SecretRead, url: string): GitCredential {
  if ('missing' in read) {
    if (read.missing === 'not_found')
      throw new GitAccessError('credential_not_found', 422, `the credentialRef Secret ${where} does not exist`);
    throw new GitAccessError(
      'credential_forbidden',
      422,
      `the Git Server may not read the credentialRef Secret ${where}: grant its ServiceAccount get on that Secret by name (a Role and RoleBinding in the namespace)`,
    );
  }
  const s = read.secret;
  if (isSshUrl(url)) return sshCredential(where, s);
  if (!url.startsWith('https://') || s.type !== BASIC_AUTH)
    throw invalid(where, `must be of type ${BASIC_AUTH} for an https repository (it is ${s.type ?? 'untyped'})`);
  const password = decoded(s, 'password');
  if (!password) throw invalid(where, 'has no password');
  return { kind: 'basic', username: decoded(s, 'username'), password };
}

/** An ssh repository is never fetched without a credential: its host key must be known (422 credential_required). */
export function requireCredential(url: string, credentialRef: string | undefined): void {
  if (!credentialRef && isSshUrl(url))
    throw new GitAccessError(
      'credential_required',
      422,
      `an ssh repository needs a credentialRef Secret of type ${SSH_AUTH} with ssh-privatekey and ${KNOWN_HOSTS_KEY}`,
    );
}

/**
 * A failed fetch as a stable reason (the message is git's, which carries no credential): the host
 * key is not the one known_hosts lists (host_key_unverified), the repository refused the
 * credential (credential_refused), anything else repository_sync_failed.
 */
export function fetchFailure(message: string, credential?: GitCredential): GitAccessError {
  if (credential?.kind === 'ssh' && /Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED/.test(message))
    return new GitAccessError(
      'host_key_unverified',
      422,
      `the repository host's key is not in the credential's ${KNOWN_HOSTS_KEY} (host key verification failed): ${message}`,
    );
  const refused =
    credential?.kind === 'ssh'
      ? /Permission denied \(|Authentication failed|Too many authentication failures/.test(message)
      : credential?.kind === 'basic' &&
        // git asks for a username when the repository answers 401 to the header it sent.
        /Authentication failed for|could not read Username|returned error: 40[13]/.test(message);
  if (refused)
    return new GitAccessError('credential_refused', 422, `the repository refused the credential: ${message}`);
  return new GitAccessError('repository_sync_failed', 422, message);
}

/** git's configuration for the credential, scoped to the repository URL (the caller puts it in GIT_CONFIG_*). */
export function credentialConfig(c: GitCredential & { kind: 'basic' }, url: string): [string, string][] {
  const basic = Buffer.from(`${c.username}:${c.password}`).toString('base64');
  return [[`http.${url}.extraHeader`, `Authorization: Basic ${basic}`]];
}

/** Configuration pairs as git's environment (GIT_CONFIG_COUNT, GIT_CONFIG_KEY_n, GIT_CONFIG_VALUE_n). */
export function configEnv(config: [string, string][]): Record<string, string> {
  const env: Record<string, string> = { GIT_CONFIG_COUNT: String(config.length) };
  config.forEach(([k, v], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = k;
    env[`GIT_CONFIG_VALUE_${i}`] = v;
  });
  return env;
}
