import assert from 'node:assert/strict';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '../fs/temp-dir.ts';
import { execTokenSource, parseExecCredential } from './exec-credential.ts';

const cred = (status: object): string =>
  JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status });

describe('exec credential plugins', () => {
  it('runs a real plugin once and caches a token without expiry', () => {
    const dir = tempDir('krt-exec-');
    const script = join(dir, 'plugin.sh');
    const count = join(dir, 'count');
    writeFileSync(
      script,
      `#!/bin/sh\necho x >> ${count}\necho "$KUBERNETES_EXEC_INFO" > ${dir}/info\nprintf '%s' '${cred({ token: 'tok-$EXTRA' }).replace('$EXTRA', 'a')}'\n`,
    );
    chmodSync(script, 0o755);
    const token = execTokenSource({ command: script, env: [{ name: 'EXTRA', value: '1' }] });
    assert.equal(token(), 'tok-a');
    assert.equal(token(), 'tok-a');
    assert.equal(readFileSync(count, 'utf8'), 'x\n', 'the plugin ran once');
    const info = JSON.parse(readFileSync(join(dir, 'info'), 'utf8')) as {
      kind: string;
      spec: { interactive: boolean };
    };
    assert.deepEqual([info.kind, info.spec.interactive], ['ExecCredential', false]);
  });

  it('re-runs the plugin when the token is about to expire', () => {
    let t = Date.parse('2026-12-01T10:00:00Z');
    let runs = 0;
    const token = execTokenSource(
      { command: 'plugin' },
      () => t,
      () => cred({ token: `t${++runs}`, expirationTimestamp: '2026-12-01T10:05:00Z' }),
    );
    assert.equal(token(), 't1');
    t += 4 * 60_000;
    assert.equal(token(), 't1');
    t += 55_000;
    assert.equal(token(), 't2');
  });

  it('rejects output that is not a token ExecCredential, with a clear error', () => {
    assert.throws(() => parseExecCredential('p', 'not json'), /p did not print an ExecCredential/);
    assert.throws(() => parseExecCredential('p', cred({})), /no status.token/);
    assert.throws(
      () => parseExecCredential('p', cred({ clientCertificateData: 'x', clientKeyData: 'y' })),
      /client certificate credentials are not supported/,
    );
  });
});
