/**
 * A Project's repository credential (seed 002 "仓库凭据"), pure. `spec.repository.credentialRef`
 * names a Secret of the Project's namespace: a reference only, never a value in the Project. Only
 * the Git Server's sync (the seed's Repo Executor) reads it, with its own identity and only where
 * the namespace granted it `get` on that Secret by name; Nodes, the controller and the frozen
 * clone input never see it. An https repository takes a `kubernetes.io/basic-auth` Secret
 * (`username`, `password`: a password or an access token), sent as an Authorization header that
 * git gets from its environment (never the URL, the command line, a config file or a log).
 */
import { GitAccessError } from './git-access.ts';

export const BASIC_AUTH = 'kubernetes.io/basic-auth';

export interface CredentialSecret {
  type?: string;
  data?: Record<string, string>;
}

/** The Git Server's read of the Secret: found, absent, or not granted to it. */
export type SecretRead = { secret: CredentialSecret } | { missing: 'not_found' | 'forbidden' };

export interface GitCredential {
  kind: 'basic';
  username: string;
  password: string;
}

const decoded = (s: CredentialSecret, key: string): string =>
  Buffer.from(s.data?.[key] ?? '', 'base64').toString('utf8');

/**
 * The credential a sync of `url` uses (422 failures a user fixes, then syncs again):
 * credential_not_found, credential_forbidden (the namespace has not granted the Git Server `get`
 * on it), credential_invalid (not a basic-auth Secret for an https repository, or no password).
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
  if (!url.startsWith('https://') || s.type !== BASIC_AUTH)
    throw new GitAccessError(
      'credential_invalid',
      422,
      `the credentialRef Secret ${where} must be of type ${BASIC_AUTH} for an https repository (it is ${s.type ?? 'untyped'})`,
    );
  const password = decoded(s, 'password');
  if (!password)
    throw new GitAccessError('credential_invalid', 422, `the credentialRef Secret ${where} has no password`);
  return { kind: 'basic', username: decoded(s, 'username'), password };
}

/** git's configuration for the credential, scoped to the repository URL (the caller puts it in GIT_CONFIG_*). */
export function credentialConfig(c: GitCredential, url: string): [string, string][] {
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
