/**
 * Who can read Run logs, end to end (seed 004):
 * - following needs only `get` on `logs.kruntimes.io` `runs/log` (no `runs` get, no pods/log):
 *   the raw API and `krt logs -f` both follow a running Run to its end with that one grant;
 * - the real backend trusts identity headers only from the API server's front proxy: a request
 *   dialled straight at the extension server's port, with or without a non-front-proxy client
 *   certificate, is refused 401 whatever X-Remote-User/Group it claims;
 * - krt works with an exec-credential kubeconfig (a plugin printing an ExecCredential holding a
 *   ServiceAccount token) for `krt get runs` and `krt logs`.
 * An unassigned Run answers 400 "is waiting to start", never 409 (docs/run-extension-api.md).
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { isApiError } from '../lib/kube/errors.ts';
import { cluster, E2E_ROOT } from './cluster.ts';
import { admin, apiServiceAvailable, deleteNamespace, newNamespace, pkiFile, serviceAccountClient } from './helpers.ts';
import { grant, krt, saKubeconfig } from './krt.ts';
import { bashRuntime, createRun, createRuntime, finished, runtimePods } from './runs-helpers.ts';

const LOGS = (ns: string, run: string): string => `/apis/logs.kruntimes.io/v1alpha1/namespaces/${ns}/runs/${run}/log`;
const COUNTING = 'for i in $(seq 1 30); do echo "line $i"; sleep 0.05; done';
const lines = (n: number): string[] => Array.from({ length: n }, (_, i) => `line ${i + 1}`);

/** A GET straight to the extension server's loopback port, bypassing the API server. */
function direct(path: string, cert?: { cert: Buffer; key: Buffer }): Promise<{ code: number; body: string }> {
  return admin()
    .get<{ metadata: object; spec: { service: { port: number } } }>(
      '/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.logs.kruntimes.io',
    )
    .then(
      (svc) =>
        new Promise((resolve, reject) => {
          const req = https.get(
            {
              host: '127.0.0.1',
              port: svc.spec.service.port,
              path,
              servername: 'kruntimes-extension.kruntimes-system.svc',
              rejectUnauthorized: false,
              headers: { 'X-Remote-User': 'kruntimes-admin', 'X-Remote-Group': 'system:masters' },
              ...(cert ?? {}),
            },
            (res) => {
              let body = '';
              res.on('data', (c: Buffer) => (body += c.toString()));
              res.on('end', () => resolve({ code: res.statusCode ?? 0, body }));
            },
          );
          req.on('error', reject);
        }),
    );
}

/** A kubeconfig whose user is an exec plugin printing an ExecCredential with the token. */
function execKubeconfig(ns: string, token: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'krt-exec-kc-'));
  const plugin = join(dir, 'credential.sh');
  const cred = { apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status: { token } };
  writeFileSync(plugin, `#!/bin/sh\ncat <<'EOF'\n${JSON.stringify(cred)}\nEOF\n`, { mode: 0o700 });
  chmodSync(plugin, 0o700);
  const file = join(dir, 'config');
  const user = { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: plugin, interactiveMode: 'Never' } };
  writeFileSync(
    file,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': 'exec',
      clusters: [
        {
          name: 'e2e',
          cluster: { server: cluster().server, 'certificate-authority': join(E2E_ROOT, 'pki', 'ca.crt') },
        },
      ],
      users: [{ name: 'exec-user', user }],
      contexts: [{ name: 'exec', context: { cluster: 'e2e', user: 'exec-user', namespace: ns } }],
    }),
    { mode: 0o600 },
  );
  return file;
}

describe('Run logs: minimal RBAC, front-proxy trust, exec credentials', function () {
  let ns: string;
  before(async () => {
    ns = await newNamespace('logacc');
    await createRuntime(ns, 'bash', bashRuntime({ replicas: 1, capacity: { resources: { runs: '4' } } }));
    await runtimePods(ns, 'bash', 1);
    await apiServiceAvailable('logs.kruntimes.io');
  });
  after(async () => {
    await deleteNamespace(ns);
  });

  it('follows a running Run with a credential holding only runs/log (API and krt logs -f)', async () => {
    const rule = { apiGroups: ['logs.kruntimes.io'], resources: ['runs/log'], verbs: ['get'] };
    await grant(ns, 'log-only', 'log-only', { ...rule, resourceNames: ['followed', 'followed-krt'] });
    const kc = await saKubeconfig(ns, 'log-only');
    const sa = await serviceAccountClient(ns, 'log-only');
    await assert.rejects(sa.get(`/apis/kruntimes.io/v1alpha1/namespaces/${ns}/runs/followed`), (e: unknown) =>
      isApiError(e, 403),
    );
    await createRun(ns, { runtime: 'bash', source: { inline: COUNTING } }, { name: 'followed' });
    await createRun(ns, { runtime: 'bash', source: { inline: COUNTING } }, { name: 'followed-krt' });
    const viaKrt = krt(['-n', ns, 'logs', '-f', 'followed-krt'], kc);
    const res = await sa.stream(LOGS(ns, 'followed'), { query: { follow: 'true' } });
    let body = '';
    for await (const c of res) body += (c as Buffer).toString();
    const got = body
      .split('\n')
      .filter(Boolean)
      .map((l) => (JSON.parse(l) as { message: string }).message);
    assert.deepEqual(got, lines(30));
    const k = await viaKrt;
    assert.equal(k.code, 0, k.stderr);
    assert.deepEqual(k.stdout.trim().split('\n'), lines(30));
    assert.equal((await finished(ns, 'followed')).status?.phase, 'Succeeded');
  });

  it('the backend refuses a direct connection without the front-proxy client certificate (401)', async () => {
    await createRun(ns, { runtime: 'bash', source: { inline: 'echo secret-ish' } }, { name: 'direct' });
    await finished(ns, 'direct');
    const path = LOGS(ns, 'direct');
    const bare = await direct(path);
    assert.equal(bare.code, 401, bare.body);
    assert.doesNotMatch(bare.body, /secret-ish/);
    const clusterCa = await direct(path, { cert: pkiFile('admin.crt'), key: pkiFile('admin.key') });
    assert.equal(clusterCa.code, 401, 'a cluster-CA client certificate is not the front proxy');
    assert.doesNotMatch(clusterCa.body, /secret-ish/);
    // The control: the same request with the front-proxy client certificate is served, so the
    // refusals above are about the certificate, not the request.
    const proxied = await direct(path, {
      cert: pkiFile('front-proxy-client.crt'),
      key: pkiFile('front-proxy-client.key'),
    });
    assert.equal(proxied.code, 200, proxied.body);
    assert.match(proxied.body, /secret-ish/);
  });

  it('krt get runs and krt logs work with an exec-credential kubeconfig', async () => {
    await grant(
      ns,
      'exec-user',
      'exec-user',
      { apiGroups: ['kruntimes.io'], resources: ['runs'], verbs: ['get', 'list'] },
      { apiGroups: ['logs.kruntimes.io'], resources: ['runs/log'], verbs: ['get'] },
    );
    await saKubeconfig(ns, 'exec-user'); // creates the ServiceAccount
    const tok = await admin().create<{ metadata: object; status: { token: string } }>(
      `/api/v1/namespaces/${ns}/serviceaccounts/exec-user/token`,
      { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } },
    );
    const kc = execKubeconfig(ns, tok.status.token);
    await createRun(ns, { runtime: 'bash', source: { inline: 'echo from-exec' } }, { name: 'exec-run' });
    await finished(ns, 'exec-run');
    const list = await krt(['-n', ns, 'get', 'runs'], kc);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, /exec-run/);
    const logs = await krt(['-n', ns, 'logs', 'exec-run'], kc);
    assert.equal(logs.code, 0, logs.stderr);
    assert.equal(logs.stdout.trim(), 'from-exec');
    const denied = await krt(['-n', ns, 'get', 'runtimes'], kc);
    assert.notEqual(denied.code, 0, 'the exec identity is the ServiceAccount, not an admin');
    assert.match(denied.stderr, /forbidden/i);
  });

  it('an unassigned Run answers 400 "is waiting to start", never 409; krt says so', async () => {
    await createRun(ns, { runtime: 'no-such-runtime', source: { inline: 'true' } }, { name: 'unassigned' });
    await assert.rejects(
      admin().request('GET', LOGS(ns, 'unassigned')),
      (e: unknown) => isApiError(e, 400) && /is waiting to start: not assigned to a Runtime Pod yet/.test(e.message),
    );
    const r = await krt(['-n', ns, 'logs', 'unassigned'], cluster().kubeconfig);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /is waiting to start/);
  });
});
