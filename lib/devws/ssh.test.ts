/**
 * ssh repositories of the sync (ADR 0035), pure: where a URL connects, the ssh command git runs
 * (strict host keys, no configuration, the pinned address), which Secret an ssh repository takes,
 * and the stable reasons of a failed fetch. runtimed/devws-git-server.test.ts runs them against a
 * real sshd.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  credentialOf,
  fetchFailure,
  keyNeedsPassphrase,
  requireCredential,
  type CredentialSecret,
} from './credential.ts';
import type { GitAccessError } from './git-access.ts';
import { isSshUrl, knownHostsName, passwdFiles, repositoryEndpoint, sshCommand } from './ssh.ts';

const b64 = (s: string): string => Buffer.from(s).toString('base64');
const sshAuth = (data: Record<string, string>, type = 'kubernetes.io/ssh-auth'): { secret: CredentialSecret } => ({
  secret: { type, data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, b64(v)])) },
});

describe('devws ssh repositories (pure)', () => {
  it('endpoints: ssh:// with and without a port, scp-like (port 22), https', () => {
    assert.deepEqual(repositoryEndpoint('ssh://git@github.com/o/r.git'), {
      transport: 'ssh',
      host: 'github.com',
      port: 22,
    });
    assert.deepEqual(repositoryEndpoint('ssh://git@[::1]:2222/o/r.git'), { transport: 'ssh', host: '::1', port: 2222 });
    assert.deepEqual(repositoryEndpoint('git@gitlab.example.com:group/r.git'), {
      transport: 'ssh',
      host: 'gitlab.example.com',
      port: 22,
    });
    assert.deepEqual(repositoryEndpoint('https://github.com/o/r.git'), {
      transport: 'https',
      host: 'github.com',
      port: 443,
    });
    assert.deepEqual(['ssh://h/r', 'git@h:r.git', 'https://h/r', 'http://h/r'].map(isSshUrl), [
      true,
      true,
      false,
      false,
    ]);
  });

  it('known_hosts names: the host on port 22, [host]:port elsewhere (as ssh-keyscan -p writes them)', () => {
    assert.equal(knownHostsName({ transport: 'ssh', host: 'github.com', port: 22 }), 'github.com');
    assert.equal(knownHostsName({ transport: 'ssh', host: 'git.internal', port: 2222 }), '[git.internal]:2222');
  });

  it('the ssh command: no config file, strict host keys, one identity, the pinned address, no proxy or prompt; every option one quoted word', () => {
    const cmd = sshCommand({
      endpoint: { transport: 'ssh', host: 'git.example.com', port: 22 },
      address: '203.0.113.7',
      keyFile: "/tmp/krt-git-ssh-x/i'd",
      knownHostsFile: '/tmp/krt-git-ssh-x/known_hosts',
    });
    assert.ok(cmd.startsWith('ssh -F /dev/null '));
    for (const o of [
      "'StrictHostKeyChecking=yes'",
      "'HostName=203.0.113.7'",
      "'HostKeyAlias=git.example.com'",
      "'IdentitiesOnly=yes'",
      "'BatchMode=yes'",
      "'ProxyCommand=none'",
      "'GlobalKnownHostsFile=/dev/null'",
      "'UserKnownHostsFile=/tmp/krt-git-ssh-x/known_hosts'",
      `'IdentityFile=/tmp/krt-git-ssh-x/i'\\''d'`,
    ])
      assert.ok(cmd.includes(`-o ${o}`), o);
    assert.ok(!/StrictHostKeyChecking=(no|accept-new)/.test(cmd));
  });

  it('an ssh repository takes an ssh-auth Secret with a private key and known_hosts; without a credentialRef it is credential_required', () => {
    const url = 'ssh://git@h.example/r.git';
    const key = '-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----';
    const c = credentialOf(
      'team/k',
      sshAuth({ 'ssh-privatekey': key, known_hosts: 'h.example ssh-ed25519 AAAA' }),
      url,
    );
    assert.deepEqual(c, { kind: 'ssh', privateKey: `${key}\n`, knownHosts: 'h.example ssh-ed25519 AAAA' });
    const reason = (f: () => unknown): string => {
      try {
        f();
      } catch (e) {
        return (e as { reason: string }).reason;
      }
      return 'none';
    };
    assert.equal(
      reason(() => credentialOf('team/k', sshAuth({ 'ssh-privatekey': key }), url)),
      'credential_invalid',
    );
    assert.equal(
      reason(() => credentialOf('team/k', sshAuth({ known_hosts: 'h k' }), url)),
      'credential_invalid',
    );
    const basic = sshAuth({ username: 'u', password: 'p' }, 'kubernetes.io/basic-auth');
    assert.equal(
      reason(() => credentialOf('team/k', basic, url)),
      'credential_invalid',
    );
    assert.equal(
      reason(() => credentialOf('team/k', basic, 'git@h.example:r.git')),
      'credential_invalid',
    );
    assert.equal(
      reason(() => requireCredential(url, undefined)),
      'credential_required',
    );
    assert.equal(
      reason(() => requireCredential('git@h.example:r.git', undefined)),
      'credential_required',
    );
    assert.equal(
      reason(() => requireCredential('https://h.example/r.git', undefined)),
      'none',
    );
  });

  it('a failed fetch: host key → host_key_unverified, refused credential → credential_refused, else repository_sync_failed', () => {
    const ssh = { kind: 'ssh' as const, privateKey: 'k', knownHosts: 'h' };
    const basic = { kind: 'basic' as const, username: 'u', password: 'p' };
    const r = (m: string, c?: Parameters<typeof fetchFailure>[1]): string => fetchFailure(m, c).reason;
    assert.equal(
      r('Host key verification failed.\nfatal: Could not read from remote repository.', ssh),
      'host_key_unverified',
    );
    assert.equal(r('git@h: Permission denied (publickey).\nfatal: Could not read', ssh), 'credential_refused');
    assert.equal(
      r("fatal: could not read Username for 'https://h': terminal prompts disabled", basic),
      'credential_refused',
    );
    assert.equal(
      r("fatal: could not read Username for 'https://h': terminal prompts disabled"),
      'repository_sync_failed',
    );
    assert.equal(r("fatal: couldn't find remote ref refs/heads/nope", ssh), 'repository_sync_failed');
  });

  it('a passphrase-protected key (OpenSSH with a cipher, encrypted PKCS#8, PEM Proc-Type ENCRYPTED) is refused credential_passphrase_unsupported; plain keys pass', () => {
    const dir = mkdtempSync(join(tmpdir(), 'krt-ssh-keys-'));
    try {
      const key = (name: string, args: string[]): string => {
        execFileSync('ssh-keygen', ['-q', '-C', name, '-f', join(dir, name), ...args]);
        return readFileSync(join(dir, name), 'utf8');
      };
      const keys = {
        opensshPlain: key('a', ['-t', 'ed25519', '-N', '']),
        opensshLocked: key('b', ['-t', 'ed25519', '-N', 'secret']),
        pemPlain: key('c', ['-t', 'rsa', '-b', '2048', '-m', 'PEM', '-N', '']),
        pemLocked: key('d', ['-t', 'rsa', '-b', '2048', '-m', 'PEM', '-N', 'secret']),
        pkcs8Locked: key('e', ['-t', 'ecdsa', '-m', 'PKCS8', '-N', 'secret']),
      };
      assert.deepEqual(Object.fromEntries(Object.entries(keys).map(([k, v]) => [k, keyNeedsPassphrase(v)])), {
        opensshPlain: false,
        opensshLocked: true,
        pemPlain: false,
        pemLocked: true,
        pkcs8Locked: true,
      });
      const read = (k: string): string => {
        try {
          credentialOf('team/k', sshAuth({ 'ssh-privatekey': k, known_hosts: 'h ssh-ed25519 AAAA' }), 'ssh://g@h/r');
          return 'accepted';
        } catch (err) {
          return (err as GitAccessError).reason;
        }
      };
      assert.equal(read(keys.opensshLocked), 'credential_passphrase_unsupported');
      assert.equal(read(keys.opensshPlain), 'accepted');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('ssh for a uid without a passwd entry runs under nss_wrapper (preloaded into ssh only, its passwd and group files named); the sync writes them (runtimed/devws-git-server.test.ts)', () => {
    const user = { library: '/usr/lib/libnss_wrapper.so', passwd: '/s/passwd', group: '/s/group' };
    const cmd = sshCommand({
      endpoint: { transport: 'ssh', host: 'h', port: 22 },
      address: '192.0.2.1',
      keyFile: '/s/id',
      knownHostsFile: '/s/known_hosts',
      user,
    });
    assert.match(
      cmd,
      /^LD_PRELOAD='\/usr\/lib\/libnss_wrapper\.so' NSS_WRAPPER_PASSWD='\/s\/passwd' NSS_WRAPPER_GROUP='\/s\/group' ssh -F \/dev\/null /,
    );
    assert.deepEqual(passwdFiles(65532, 65532, '/s'), {
      passwd: 'kruntimes:x:65532:65532:kruntimes:/s:/usr/sbin/nologin\n',
      group: 'kruntimes:x:65532:\n',
    });
  });
});
