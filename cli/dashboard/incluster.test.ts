/**
 * The in-cluster dashboard's front door without a cluster (its API server points nowhere): HTTPS
 * only with the certificate the tls-certificates function issues for its Service (a rotated pair
 * is served without a restart), the sealed cookie, the sign-in page and its CSRF check, the Host
 * check, the auth proxy mode's refusal without a bearer token, and the configuration from the
 * environment (fail closed).
 * e2e/dashboard.e2e.ts signs in with real ServiceAccount tokens against the real API server.
 */
import assert from 'node:assert/strict';
import { randomBytes, X509Certificate } from 'node:crypto';
import { renameSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { TLSSocket } from 'node:tls';
import { join } from 'node:path';
import { tempDir } from '../../lib/fs/temp-dir.ts';
import { KubeClient } from '../../lib/kube/client.ts';
import { buildUi } from '../../scripts/build-ui.ts';
import { DASHBOARD_DNS, desiredMaterial } from '../../functions/tls-certificates/index.ts';
import { issueServing, type KeyPairPem } from '../../lib/tls/certs.ts';
import { inClusterOptions, seal, SESSION_COOKIE, startInClusterDashboard, unseal } from './incluster.ts';
import type { Dashboard } from './server.ts';
import type { ReloadEvent, ServingTls } from './tls.ts';

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** The SHA-256 fingerprint of the certificate the server presented. */
  served: string;
}

/** The Service's name, as the Ingress (or the e2e's browser) reaches the Pod. */
const SERVICE_NAME = DASHBOARD_DNS[0] ?? '';
/** The certificate material the tls-certificates function issues (its CA and the dashboard's pair). */
const issued = desiredMaterial(undefined, new Date()).then((m) => m.material);

/** An HTTPS request that trusts only the project's CA and checks the Service's name; a fresh connection each. */
async function request(
  url: string,
  o: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Answer> {
  const ca = (await issued).ca.cert;
  return new Promise<Answer>((resolve, reject) => {
    const opts = { method: o.method ?? 'GET', headers: o.headers, ca, servername: SERVICE_NAME, agent: false };
    const req = https.request(url, opts, (res) => {
      const served = (res.socket as TLSSocket).getPeerCertificate().fingerprint256;
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, served }));
    });
    req.on('error', reject);
    req.end(o.body);
  });
}

/** Writes a key pair where the Secret's volume would hold it (each file replaced by a rename, like the kubelet's swap). */
function writePair(dir: string, pair: Partial<KeyPairPem>): ServingTls {
  const tls = { certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key') };
  for (const [file, pem] of [
    [tls.certFile, pair.cert],
    [tls.keyFile, pair.key],
  ] as const) {
    if (pem === undefined) continue;
    writeFileSync(`${file}.new`, pem);
    renameSync(`${file}.new`, file);
  }
  return tls;
}

async function servingTls(): Promise<ServingTls> {
  return writePair(tempDir('krt-dash-tls-'), (await issued).dashboard);
}

const nowhere = (): KubeClient => new KubeClient({ server: 'https://127.0.0.1:1' });
const fingerprint = (pem: string): string => new X509Certificate(pem).fingerprint256;

describe('in-cluster dashboard: HTTPS only, with the certificate issued for its Service', function () {
  this.timeout(30_000);
  let d: Dashboard | undefined;
  before(() => buildUi({ ifStale: true }));
  afterEach(async () => d?.close());

  it('answers HTTPS with the dashboard certificate and nothing over plain HTTP', async () => {
    d = await startInClusterDashboard({
      base: nowhere(),
      auth: 'proxy',
      listenHost: '127.0.0.1',
      tls: await servingTls(),
    });
    assert.match(d.origin, /^https:\/\//);
    const ok = await request(`${d.origin}/healthz`);
    assert.equal(ok.status, 200);
    assert.equal(ok.served, fingerprint((await issued).dashboard.cert));
    const plain = d.origin.replace('https://', 'http://');
    await assert.rejects(
      new Promise((resolve, reject) => http.get(`${plain}/healthz`, resolve).on('error', reject)),
      'a plain HTTP request gets no answer',
    );
  });

  it('serves a rotated pair without a restart, and keeps the old one while the new files do not match', async () => {
    const tls = await servingTls();
    const events: ReloadEvent[] = [];
    let heard: () => void = () => undefined;
    const next = (): Promise<void> => new Promise((r) => (heard = r));
    const onReload = (e: ReloadEvent): void => {
      events.push(e);
      heard();
    };
    d = await startInClusterDashboard({
      base: nowhere(),
      auth: 'proxy',
      listenHost: '127.0.0.1',
      tls: { ...tls, checkMs: 50 },
      onReload,
    });
    const dir = join(tls.certFile, '..');
    // What the function does 30 days before expiry: a new pair for the Service from the same CA.
    const renewed = await issueServing(
      (await issued).ca,
      SERVICE_NAME,
      { dns: DASHBOARD_DNS, ips: [] },
      new Date(),
      365,
    );
    let change = next();
    writePair(dir, { cert: renewed.cert });
    await change;
    assert.equal(events.at(-1)?.event, 'kept', 'a new certificate with the old key does not load');
    assert.equal((await request(`${d.origin}/healthz`)).served, fingerprint((await issued).dashboard.cert));
    change = next();
    writePair(dir, { key: renewed.key });
    await change;
    assert.equal(events.at(-1)?.event, 'reloaded');
    const after = await request(`${d.origin}/healthz`, {});
    assert.equal(after.status, 200);
    assert.equal(after.served, fingerprint(renewed.cert));
  });

  it('refuses to start without a loadable pair', async () => {
    const tls = writePair(tempDir('krt-dash-tls-'), {
      cert: (await issued).dashboard.cert,
      key: (await issued).functions.key,
    });
    await assert.rejects(
      startInClusterDashboard({ base: nowhere(), auth: 'proxy', listenHost: '127.0.0.1', tls }),
      /serving certificate .* do not load/,
    );
  });
});

describe('in-cluster dashboard: sealed session cookie', () => {
  it('unseals what it sealed, and nothing sealed with another key or altered', () => {
    const key = randomBytes(32);
    const sealed = seal(key, 'tok-123');
    assert.equal(unseal(key, sealed), 'tok-123');
    assert.doesNotMatch(sealed, /tok-123/);
    assert.equal(unseal(randomBytes(32), sealed), undefined);
    const raw = Buffer.from(sealed, 'base64url');
    raw[raw.length - 1] = (raw[raw.length - 1] ?? 0) ^ 1;
    assert.equal(unseal(key, raw.toString('base64url')), undefined);
    assert.equal(unseal(key, 'short'), undefined);
  });
});

describe('in-cluster dashboard: front door', function () {
  this.timeout(30_000);
  let token: Dashboard;
  let proxy: Dashboard;
  const key = randomBytes(32);
  before(async () => {
    await buildUi({ ifStale: true });
    const tls = await servingTls();
    token = await startInClusterDashboard({ base: nowhere(), auth: 'token', listenHost: '127.0.0.1', key, tls });
    proxy = await startInClusterDashboard({ base: nowhere(), auth: 'proxy', listenHost: '127.0.0.1', tls });
  });
  after(async () => {
    await token?.close();
    await proxy?.close();
  });

  it('sends a browser without a session to the sign-in page, whose form may post only to itself', async () => {
    const page = await request(`${token.origin}/`);
    assert.equal(page.status, 303);
    assert.equal(page.headers.location, '/login');
    const api = await request(`${token.origin}/api/config`);
    assert.equal(api.status, 401);
    const login = await request(`${token.origin}/login`);
    assert.equal(login.status, 200);
    assert.match(String(login.headers['content-security-policy']), /form-action 'self'/);
    assert.match(String(login.headers['content-security-policy']), /script-src 'self'/);
    assert.doesNotMatch(login.body, /<script|style=/);
    // Under no-referrer a form post carries `Origin: null` and would fail the login CSRF check.
    assert.equal(login.headers['referrer-policy'], 'same-origin');
    assert.equal((await request(`${token.origin}/healthz`, { headers: { host: 'pod-ip:8080' } })).status, 200);
  });

  it('refuses a sign-in from another origin (login CSRF) and a foreign Host', async () => {
    const body = 'token=anything';
    const headers = { 'content-type': 'application/x-www-form-urlencoded' };
    const cross = await request(`${token.origin}/login`, {
      method: 'POST',
      headers: { ...headers, origin: 'https://attacker.example' },
      body,
    });
    assert.equal(cross.status, 403);
    assert.equal(cross.headers['set-cookie'], undefined);
    // The control: the page's own Origin passes (the API server, nowhere here, cannot check the token).
    const same = await request(`${token.origin}/login`, {
      method: 'POST',
      headers: { ...headers, origin: token.origin },
      body,
    });
    assert.equal(same.status, 502);
    assert.equal(same.headers['set-cookie'], undefined);
    const host = await request(`${token.origin}/login`, { headers: { host: 'attacker.example' } });
    assert.equal(host.status, 421);
  });

  it('acts only on a cookie it sealed itself; actions still need the Origin and CSRF header', async () => {
    const forged = await request(`${token.origin}/api/config`, { headers: { cookie: `${SESSION_COOKIE}=abc` } });
    assert.equal(forged.status, 401);
    const cookie = `${SESSION_COOKIE}=${seal(key, 'user-token')}`;
    const cfg = await request(`${token.origin}/api/config`, { headers: { cookie } });
    assert.equal(cfg.status, 200);
    const noCsrf = await request(`${token.origin}/api/runs/team-a/r1/cancel`, {
      method: 'POST',
      headers: { cookie, origin: token.origin },
    });
    assert.equal(noCsrf.status, 403);
  });

  it('behind an auth proxy: refuses a request without the bearer token, forwards one with it', async () => {
    const none = await request(`${proxy.origin}/api/config`);
    assert.equal(none.status, 401);
    assert.match((JSON.parse(none.body) as { message: string }).message, /auth proxy/);
    const withToken = await request(`${proxy.origin}/api/config`, { headers: { authorization: 'Bearer abc' } });
    assert.equal(withToken.status, 200);
    assert.equal((await request(`${proxy.origin}/login`)).status, 401, 'no sign-in page behind a proxy');
  });
});

describe('in-cluster dashboard: configuration (fail closed)', () => {
  const dir = tempDir('krt-dash-');
  const ca = join(dir, 'ca.crt');
  writeFileSync(ca, 'not read by the client until a request');
  const env = { KUBERNETES_SERVICE_HOST: '10.96.0.1', KRT_DASHBOARD_KUBE_CA: ca };

  it('needs the cluster, an https:// public URL and a known auth mode', () => {
    assert.throws(() => inClusterOptions({ KRT_DASHBOARD_URL: 'https://d.example' }), /not running in a cluster/);
    assert.throws(() => inClusterOptions({ ...env }), /KRT_DASHBOARD_URL/);
    assert.throws(() => inClusterOptions({ ...env, KRT_DASHBOARD_URL: 'http://d.example' }), /https/);
    assert.throws(
      () => inClusterOptions({ ...env, KRT_DASHBOARD_URL: 'https://d.example', KRT_DASHBOARD_AUTH: 'none' }),
      /token or proxy/,
    );
  });

  it('uses no credentials of its own: the API server and its CA only; serves HTTPS from the mounted pair', () => {
    const o = inClusterOptions({ ...env, KRT_DASHBOARD_URL: 'https://d.example' });
    assert.equal(o.auth, 'token');
    assert.deepEqual(o.tls, { certFile: '/etc/kruntimes/tls/tls.crt', keyFile: '/etc/kruntimes/tls/tls.key' });
    assert.equal(o.port, 8443);
    assert.equal(o.base.server.toString(), 'https://10.96.0.1/');
    assert.equal((o.base as unknown as { token?: unknown }).token, undefined);
  });
});
