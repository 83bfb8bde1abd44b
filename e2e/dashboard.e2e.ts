/**
 * The web dashboard in a real headless Chromium (Debian's package via playwright-core, no
 * browser download) against the real cluster, each dashboard acting as a ServiceAccount's
 * kubeconfig identity (issue 16):
 * - a WorkflowRun triggered from the page: its DAG turns green job by job, live, no reload;
 * - a Run's live log shows lines written after the page opened, each once, in order;
 * - a user without runs/log sees a clear refusal, not an empty pane;
 * - cancel works for a user with patch on Runs, and is hidden (and refused by the API server)
 *   for one without it;
 * - the server refuses requests without its session cookie, with a foreign Host, or actions
 *   without the CSRF header, and sends the strict CSP;
 * - the in-cluster mode serves HTTPS only, with the certificate the cluster's tls-certificates
 *   function issued for the dashboard's Service (the browser reaches it by that name).
 */
import assert from 'node:assert/strict';
import { createHash, X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { parse } from 'yaml';
import { KubeClient } from '../lib/kube/client.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { clientFromKubeconfig } from '../lib/kube/config.ts';
import { SESSION_COOKIE, startInClusterDashboard } from '../cli/dashboard/incluster.ts';
import type { ServingTls } from '../cli/dashboard/tls.ts';
import { DASHBOARD_DNS, NAMESPACE as KRUNTIMES_NS, SECRET as TLS_SECRET } from '../functions/tls-certificates/index.ts';
import { startDashboard, type Dashboard } from '../cli/dashboard/server.ts';
import { buildUi } from '../scripts/build-ui.ts';
import { cluster, E2E_ROOT } from './cluster.ts';
import { admin, apiServiceAvailable, deleteNamespace, newNamespace } from './helpers.ts';
import { grant, saKubeconfig } from './krt.ts';
import { bashRuntime, createRun, createRuntime, finished, GROUP, phase, runtimePods } from './runs-helpers.ts';

const CHROMIUM = process.env.KRT_CHROMIUM ?? '/usr/bin/chromium';
/** KRT_DASHBOARD_SCREENSHOTS=<dir>: also save the pages this spec visits (docs/screenshots is made so). */
const SHOTS = process.env.KRT_DASHBOARD_SCREENSHOTS;
const LOGS = (ns: string, run: string): string => `/apis/logs.kruntimes.io/v1alpha1/namespaces/${ns}/runs/${run}/log`;
const read = (verbs = ['get', 'list', 'watch']): { apiGroups: string[]; verbs: string[] } => ({
  apiGroups: ['kruntimes.io'],
  verbs,
});

const tokenOf = (kubeconfig: string): string =>
  (parse(readFileSync(kubeconfig, 'utf8')) as { users: { user: { token: string } }[] }).users[0]?.user.token ?? '';

/** A GET with a chosen Host header (fetch would set its own). */
function statusWithHost(origin: string, path: string, cookie: string, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${origin}${path}`, { headers: { cookie, host } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
  });
}

/** The dashboard Service's name: the in-cluster mode is reached by it, as an Ingress reaches the Pod. */
const DASHBOARD_HOST = DASHBOARD_DNS[0] ?? '';

/**
 * The dashboard's pair and the CA from the cluster's TLS Secret (what the tls-certificates
 * function issued), the pair written to files as the Pod's volume holds it.
 */
async function clusterDashboardTls(): Promise<{ tls: ServingTls; ca: string; spki: string }> {
  const secret = await admin().get<KubeObject & { data: Record<string, string> }>(
    `/api/v1/namespaces/${KRUNTIMES_NS}/secrets/${TLS_SECRET}`,
  );
  const pem = (k: string): string => Buffer.from(secret.data[k] ?? '', 'base64').toString('utf8');
  const dir = mkdtempSync(join(tmpdir(), 'krt-dash-e2e-'));
  const tls = { certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key') };
  writeFileSync(tls.certFile, pem('dashboard.crt'));
  writeFileSync(tls.keyFile, pem('dashboard.key'), { mode: 0o600 });
  const der = new X509Certificate(pem('dashboard.crt')).publicKey.export({ type: 'spki', format: 'der' });
  return { tls, ca: pem('ca-bundle.crt'), spki: createHash('sha256').update(der).digest('base64') };
}

/** A free port on 127.0.0.1 (the in-cluster server's URL names its port before it listens). */
async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise((r) => srv.close(r));
  return port;
}

/**
 * An HTTPS request to `url` (a name of the dashboard's Service) on 127.0.0.1, trusting only the
 * cluster's CA and checking the certificate against that name; resolves with the status.
 */
function httpsStatus(url: string, ca: string, headers: Record<string, string> = {}): Promise<number> {
  const u = new URL(url);
  const path = u.pathname + u.search;
  return new Promise((resolve, reject) => {
    const opts = { host: '127.0.0.1', port: u.port, path, servername: u.hostname, ca, agent: false };
    const req = https.get({ ...opts, headers: { ...headers, host: u.host } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
  });
}

/** Waits for `selector`; on a timeout the error carries what the page showed. */
async function waitShown(page: Page, selector: string, timeout = 60_000): Promise<void> {
  try {
    await page.waitForSelector(selector, { timeout });
  } catch (err) {
    const shown = await page
      .locator('main')
      .innerText()
      .catch(() => '(no main)');
    const errors = (page as Page & { errors?: string[] }).errors ?? [];
    throw new Error(
      `${err instanceof Error ? err.message.split('\n')[0] : String(err)}; the page showed:\n${shown}\nconsole errors: ${errors.join('; ')}`,
    );
  }
}

async function shot(page: Page, name: string): Promise<void> {
  if (!SHOTS) return;
  await mkdir(SHOTS, { recursive: true });
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

describe('dashboard in a real browser', function () {
  let ns: string;
  let browser: Browser;
  let full: Dashboard;
  let limited: Dashboard;
  const tokens = { operator: '', reader: '' };
  let served: Awaited<ReturnType<typeof clusterDashboardTls>>;

  const contexts: { close: () => Promise<void> }[] = [];
  async function open(d: Dashboard, hash: string): Promise<Page> {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    contexts.push(ctx);
    const page = await ctx.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    await page.goto(d.loginUrl);
    await page.goto(`${d.origin}/${hash}`);
    (page as Page & { errors?: string[] }).errors = errors;
    return page;
  }

  before(async () => {
    await buildUi();
    ns = await newNamespace('dash');
    await createRuntime(ns, 'bash', bashRuntime({ replicas: 1, capacity: { resources: { runs: '4' } } }));
    const events = { apiGroups: [''], resources: ['events', 'pods'], verbs: ['list', 'watch'] };
    await grant(
      ns,
      'operator',
      'operator',
      { ...read(['get', 'list', 'watch', 'patch', 'update']), resources: ['runs', 'workflowruns'] },
      { ...read(['create']), resources: ['workflowruns'] },
      { ...read(), resources: ['workflows', 'runtimes', 'persistentworkspaces'] },
      { apiGroups: ['logs.kruntimes.io'], resources: ['runs/log'], verbs: ['get'] },
      { apiGroups: ['artifacts.kruntimes.io'], resources: ['runs/artifacts'], verbs: ['get'] },
      { apiGroups: ['dev.kruntimes.io'], resources: ['workspaces', 'operations'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: ['dev.kruntimes.io'], resources: ['operations'], verbs: ['create'] },
      events,
    );
    const devRead = {
      apiGroups: ['dev.kruntimes.io'],
      resources: ['workspaces', 'operations'],
      verbs: ['list', 'watch'],
    };
    await grant(ns, 'reader', 'reader', { ...read(), resources: ['runs'] }, devRead, events);
    const kc = { operator: await saKubeconfig(ns, 'operator'), reader: await saKubeconfig(ns, 'reader') };
    tokens.operator = tokenOf(kc.operator);
    tokens.reader = tokenOf(kc.reader);
    full = await startDashboard(clientFromKubeconfig(kc.operator), { namespace: ns });
    limited = await startDashboard(clientFromKubeconfig(kc.reader), { namespace: ns });
    served = await clusterDashboardTls();
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--no-sandbox',
        // The in-cluster server under its Service's name; Chromium has no trust store to add the
        // cluster's CA to, so it accepts exactly the dashboard's key (SPKI pin), nothing else.
        `--host-resolver-rules=MAP ${DASHBOARD_HOST} 127.0.0.1`,
        `--ignore-certificate-errors-spki-list=${served.spki}`,
      ],
    });
    await runtimePods(ns, 'bash', 1);
    await apiServiceAvailable('logs.kruntimes.io');
  });
  afterEach(async () => {
    for (const c of contexts.splice(0)) await c.close();
  });
  after(async () => {
    await browser?.close();
    await full?.close();
    await limited?.close();
    if (ns) await deleteNamespace(ns);
  });

  it('triggers a WorkflowRun with inputs; its DAG turns green job by job, live', async () => {
    await admin().create(`${GROUP}/namespaces/${ns}/workflows`, {
      apiVersion: 'kruntimes.io/v1alpha1',
      kind: 'Workflow',
      metadata: { name: 'pipeline' },
      spec: {
        inputs: { greeting: { required: true } },
        jobs: {
          build: { 'runs-on': 'bash', steps: [{ name: 'compile', run: 'echo "built ${{ inputs.greeting }}"' }] },
          test: {
            'runs-on': 'bash',
            needs: ['build'],
            outputs: { coverage: '${{ steps.report.outputs.coverage }}' },
            steps: [
              { name: 'unit', run: 'sleep 3; echo tested' },
              { name: 'report', id: 'report', run: 'echo "coverage=87" >> "$KRUNTIME_OUTPUTS"' },
            ],
          },
          lint: { 'runs-on': 'bash', needs: ['build'], steps: [{ name: 'eslint', run: 'echo clean' }] },
          package: { 'runs-on': 'bash', needs: ['test', 'lint'], steps: [{ name: 'tar', run: 'echo packaged' }] },
        },
      },
    });
    const page = await open(full, `#/ns/${ns}/workflows`);
    await page.getByRole('button', { name: 'Trigger' }).click();
    // The required input left empty: the server's binder refuses it, the page says why.
    await page.locator('form[data-trigger="pipeline"]').getByRole('button', { name: 'Run' }).click();
    await waitShown(page, '.refused:has-text("missing required input")');
    // Chromium reports the 400 answer as a console error: expected here, not after.
    (page as Page & { errors: string[] }).errors.length = 0;
    await page.fill('form[data-trigger="pipeline"] input[name="greeting"]', 'hello-dash');
    await page.locator('form[data-trigger="pipeline"]').getByRole('button', { name: 'Run' }).click();
    await page.waitForURL(/#\/ns\/.*\/workflowruns\//);
    const wfr = decodeURIComponent(page.url().split('/').pop() ?? '');
    const created = await admin().get<KubeObject & { spec: { jobs: { build: { steps: { run: string }[] } } } }>(
      `${GROUP}/namespaces/${ns}/workflowruns/${wfr}`,
    );
    assert.equal(created.spec.jobs.build.steps[0]?.run, 'echo "built hello-dash"', 'the input reached the run');
    await page.evaluate(() => ((globalThis as unknown as { marker: number }).marker = 42));
    await waitShown(page, '[data-job="build"][data-phase="Succeeded"]', 60_000);
    // build is green while test (3 s of sleep after build) is not yet: the colours follow the run.
    assert.notEqual(await page.getAttribute('[data-job="test"]', 'data-phase'), 'Succeeded');
    await shot(page, 'workflowrun-running');
    await waitShown(page, '[data-job="package"][data-phase="Succeeded"]', 60_000);
    await waitShown(page, '.facts [data-phase="Succeeded"]', 30_000);
    assert.equal(
      await page.evaluate(() => (globalThis as unknown as { marker?: number }).marker),
      42,
      'no page reload',
    );
    assert.equal((await page.locator('svg.gantt .bar').count()) >= 4, true, 'a Gantt bar per job and step');
    assert.deepEqual((page as Page & { errors?: string[] }).errors, []);
    await page.locator('[data-job="test"]').click();
    await shot(page, 'workflowrun');
  });

  it("shows a Run's log lines written after the page opened, each once and in order", async () => {
    await createRun(
      ns,
      { runtime: 'bash', source: { inline: 'for i in $(seq 1 20); do echo "tick $i"; sleep 0.4; done' } },
      { name: 'ticker' },
    );
    await phase(ns, 'ticker', 'Running');
    const page = await open(full, `#/ns/${ns}/runs/ticker`);
    await waitShown(page, 'pre.log div');
    const atOpen = await admin().request<{ items: { message: string }[] }>('GET', LOGS(ns, 'ticker'));
    assert.ok(!atOpen.items.some((i) => i.message === 'tick 20'), 'tick 20 was not written when the page opened');
    await waitShown(page, '.log-state[data-state="ended"]', 60_000);
    const shown = await page.locator('pre.log div').allTextContents();
    assert.deepEqual(
      shown,
      Array.from({ length: 20 }, (_, i) => `tick ${i + 1}`),
    );
    await waitShown(page, '.facts [data-phase="Succeeded"]', 30_000);
    await shot(page, 'run');
  });

  it('cancels a Run for a user with patch on Runs; hides and refuses it for one without', async () => {
    await createRun(ns, { runtime: 'bash', source: { inline: 'echo started; sleep 300' } }, { name: 'long' });
    await phase(ns, 'long', 'Running');
    const reader = await open(limited, `#/ns/${ns}/runs/long`);
    await waitShown(reader, '.no-cancel');
    assert.equal(await reader.getByRole('button', { name: 'Cancel Run' }).count(), 0);
    const refused = await reader.evaluate(async (n) => {
      const r = await fetch(`/api/runs/${n}/long/cancel`, { method: 'POST', headers: { 'X-Krt-Csrf': '1' } });
      return { status: r.status, body: (await r.json()) as { reason: string } };
    }, ns);
    assert.equal(refused.status, 403, 'the API server still decides');
    assert.equal(refused.body.reason, 'Forbidden');
    const op = await open(full, `#/ns/${ns}/runs/long`);
    await op.getByRole('button', { name: 'Cancel Run' }).click();
    await waitShown(op, '.facts [data-phase="Cancelled"]');
    assert.equal((await finished(ns, 'long')).status?.phase, 'Cancelled');
    await op.goto(`${full.origin}/#/ns/${ns}/runs`);
    await waitShown(op, 'tr[data-run="long"]');
    await shot(op, 'runs');
    await op.goto(`${full.origin}/#/ns/${ns}/runtimes`);
    await waitShown(op, '.slots');
    await shot(op, 'runtimes');
  });

  it('a user without runs/log sees a clear refusal, not an empty pane', async () => {
    const page = await open(limited, `#/ns/${ns}/runs/ticker`);
    await waitShown(page, '.refused:has-text("read this Run\'s logs")');
    const alert = page.locator('.refused', { hasText: "read this Run's logs" });
    const text = await alert.textContent();
    assert.match(text ?? '', /not allowed to read this Run's logs/);
    assert.match(text ?? '', /Forbidden \(HTTP 403\)/);
    assert.match(text ?? '', /runs\/log/);
    assert.equal(await page.locator('pre.log').count(), 0);
    await shot(page, 'refused-logs');
  });

  it("in-cluster mode: HTTPS only; signs in with the user's token (sealed Secure cookie) or the auth proxy's, acts only as that user", async () => {
    // The API server and its CA only: no credentials of the server's own.
    const base = new KubeClient({ server: cluster().server, ca: readFileSync(join(E2E_ROOT, 'pki', 'ca.crt')) });
    const start = async (auth: 'token' | 'proxy'): Promise<Dashboard> => {
      const port = await freePort();
      const url = `https://${DASHBOARD_HOST}:${port}`;
      return startInClusterDashboard({
        base,
        auth,
        listenHost: '127.0.0.1',
        port,
        url,
        namespace: ns,
        tls: served.tls,
      });
    };
    const byToken = await start('token');
    const byProxy = await start('proxy');
    await createRun(ns, { runtime: 'bash', source: { inline: 'true' } }, { name: 'signed-in' });
    try {
      const ctx = await browser.newContext();
      contexts.push(ctx);
      const page = await ctx.newPage();
      assert.match(byToken.origin, /^https:\/\/kruntimes-dashboard\.kruntimes-system\.svc:/);
      // Plain HTTP gets no answer; HTTPS presents the cluster-issued certificate for the Service's name.
      const plain = `http://127.0.0.1:${new URL(byToken.origin).port}/healthz`;
      await assert.rejects(
        new Promise((resolve, reject) => http.get(plain, resolve).on('error', reject)),
        'no plain HTTP',
      );
      assert.equal(await httpsStatus(`${byToken.origin}/healthz`, served.ca), 200);
      await page.goto(`${byToken.origin}/`);
      await page.waitForURL(/\/login$/);
      await page.fill('input[name="token"]', 'not-a-token');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForSelector('.refused:has-text("did not accept this token")');
      await page.fill('input[name="token"]', tokens.reader);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.goto(`${byToken.origin}/#/ns/${ns}/runs`);
      await waitShown(page, 'tr[data-run="signed-in"]');
      const cookie = (await ctx.cookies()).find((c) => c.name === SESSION_COOKIE);
      assert.deepEqual([cookie?.httpOnly, cookie?.secure, cookie?.sameSite], [true, true, 'Strict']);
      assert.ok(!cookie?.value.includes(tokens.reader.slice(-24)), 'the cookie holds the token sealed');
      const wfs = `${GROUP}/namespaces/${ns}/workflows`;
      const asReader = await page.evaluate(async (p) => (await fetch(`/api/get?path=${p}`)).status, wfs);
      assert.equal(asReader, 403, 'the reader may not list Workflows: the server acts as the reader');
      const viaProxy = (auth?: string): Promise<number> =>
        httpsStatus(
          `${byProxy.origin}/api/get?path=${encodeURIComponent(wfs)}`,
          served.ca,
          auth ? { authorization: `Bearer ${auth}` } : {},
        );
      assert.deepEqual(
        [await viaProxy(), await viaProxy(tokens.reader), await viaProxy(tokens.operator)],
        [401, 403, 200],
      );
    } finally {
      await byToken.close();
      await byProxy.close();
    }
  });

  it('shows developer Workspaces with their operation and step; start/stop only for who may create Operations', async () => {
    await admin().create(`/apis/dev.kruntimes.io/v1alpha1/namespaces/${ns}/projects`, {
      apiVersion: 'dev.kruntimes.io/v1alpha1',
      kind: 'Project',
      metadata: { name: 'p1' },
      spec: { repository: { url: 'https://git.example/o/r.git', defaultBranch: 'main' } },
    });
    const page = await open(full, `#/ns/${ns}/devworkspaces`);
    // The controller's create operation for the Project's main Workspace, with the step it is at.
    const current = '[data-devworkspace="p1-main"] [data-operation="p1-create"]';
    await waitShown(page, `${current}:not([data-step=""])`);
    const step = await page.getAttribute(current, 'data-step');
    assert.ok(['sandbox', 'node', 'clone', 'plugin', 'done'].includes(step ?? ''), `a create step: ${step}`);
    // The API server (admission) still decides: one unfinished operation per Project.
    await page.locator('[data-devworkspace="p1-main"]').getByRole('button', { name: 'Stop' }).click();
    await waitShown(page, '.refused:has-text("operation_in_progress")');
    (page as Page & { errors: string[] }).errors.length = 0;
    await shot(page, 'devworkspaces');
    const reader = await open(limited, `#/ns/${ns}/devworkspaces`);
    await waitShown(reader, '[data-devworkspace="p1-main"] [data-operation="p1-create"]');
    assert.equal(await reader.getByRole('button', { name: 'Stop' }).count(), 0, 'hidden: no create on Operations');
    const refused = await reader.evaluate(async (n) => {
      const r = await fetch(`/api/devworkspaces/${n}/p1-main/stop`, { method: 'POST', headers: { 'X-Krt-Csrf': '1' } });
      return r.status;
    }, ns);
    assert.equal(refused, 403, 'and refused by the API server');
  });

  it('refuses requests without the session cookie, with a foreign Host or without the CSRF header', async () => {
    const noCookie = await fetch(`${full.origin}/api/config`);
    assert.equal(noCookie.status, 401);
    const badToken = await fetch(`${full.origin}/login?token=nope`, { redirect: 'manual' });
    assert.equal(badToken.status, 401);
    assert.equal(badToken.headers.get('set-cookie'), null);
    const login = await fetch(full.loginUrl, { redirect: 'manual' });
    const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    assert.match(login.headers.get('set-cookie') ?? '', /HttpOnly; SameSite=Strict/);
    const ok = await fetch(`${full.origin}/api/config`, { headers: { cookie } });
    assert.equal(ok.status, 200);
    assert.match(ok.headers.get('content-security-policy') ?? '', /script-src 'self'/);
    const html = await (await fetch(`${full.origin}/`, { headers: { cookie } })).text();
    assert.doesNotMatch(html, /<script>(?!<\/script>)|<script [^>]*>[^<]+<\/script>/, 'no inline script');
    assert.equal(await statusWithHost(full.origin, '/api/config', cookie, 'evil.example:80'), 421, 'DNS rebinding');
    const csrf = await fetch(`${full.origin}/api/runs/${ns}/ticker/cancel`, {
      method: 'POST',
      headers: { cookie, origin: full.origin },
    });
    assert.equal(csrf.status, 403);
    const secret = await fetch(`${full.origin}/api/get?path=/api/v1/namespaces/${ns}/secrets`, { headers: { cookie } });
    assert.equal(secret.status, 400, 'not an open proxy');
  });
});
