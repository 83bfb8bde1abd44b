/**
 * The dashboard server's browser-facing checks, without a cluster (its client points nowhere):
 * login token → HttpOnly SameSite=Strict cookie, 401 without it, 421 for a foreign Host (DNS
 * rebinding), 403 for actions without the page's Origin and CSRF header, 400 for paths off the
 * allow-list, and the strict CSP on every answer.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { KubeClient } from '../../lib/kube/client.ts';
import { buildUi } from '../../scripts/build-ui.ts';
import { CSP, startDashboard, type Dashboard } from './server.ts';

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

function request(url: string, o: { method?: string; headers?: Record<string, string> } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: o.method ?? 'GET', headers: o.headers }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('dashboard server hardening', function () {
  this.timeout(30_000);
  let d: Dashboard;
  let cookie: string;
  before(async () => {
    await buildUi({ ifStale: true });
    d = await startDashboard(new KubeClient({ server: 'https://127.0.0.1:1' }), { namespace: 'team-a' });
    const login = await request(d.loginUrl);
    assert.equal(login.status, 303);
    const set = login.headers['set-cookie']?.[0] ?? '';
    assert.match(set, /HttpOnly/);
    assert.match(set, /SameSite=Strict/);
    cookie = set.split(';')[0] ?? '';
  });
  after(async () => {
    await d?.close();
  });

  it('serves the page with the session cookie, with the strict CSP and no inline script', async () => {
    const page = await request(`${d.origin}/`, { headers: { cookie } });
    assert.equal(page.status, 200);
    assert.equal(page.headers['content-security-policy'], CSP);
    assert.equal(page.headers['x-content-type-options'], 'nosniff');
    assert.match(page.body, /<script type="module" src="\/app.js"><\/script>/);
    assert.doesNotMatch(page.body, /<script(?![^>]*src=)[^>]*>/, 'no inline script');
    assert.doesNotMatch(page.body, /style=|<style/, 'no inline style');
    const cfg = await request(`${d.origin}/api/config`, { headers: { cookie } });
    assert.deepEqual(JSON.parse(cfg.body), { namespace: 'team-a' });
  });

  it('refuses requests without the cookie and a wrong login token', async () => {
    assert.equal((await request(`${d.origin}/api/config`)).status, 401);
    assert.equal((await request(`${d.origin}/`, { headers: { cookie: 'krt_dashboard=guess' } })).status, 401);
    const bad = await request(`${d.origin}/login?token=nope`);
    assert.equal(bad.status, 401);
    assert.equal(bad.headers['set-cookie'], undefined);
  });

  it('refuses a foreign Host (DNS rebinding), even with the cookie', async () => {
    const r = await request(`${d.origin}/api/config`, { headers: { cookie, host: 'attacker.example' } });
    assert.equal(r.status, 421);
  });

  it('refuses actions without the same Origin and the CSRF header', async () => {
    const path = `${d.origin}/api/runs/team-a/r1/cancel`;
    const noHeader = await request(path, { method: 'POST', headers: { cookie, origin: d.origin } });
    assert.equal(noHeader.status, 403);
    const otherOrigin = await request(path, {
      method: 'POST',
      headers: { cookie, origin: 'http://attacker.example', 'x-krt-csrf': '1' },
    });
    assert.equal(otherOrigin.status, 403);
    // The control: with both, the request is forwarded (and fails upstream: nothing listens there).
    const forwarded = await request(path, { method: 'POST', headers: { cookie, origin: d.origin, 'x-krt-csrf': '1' } });
    assert.equal(forwarded.status, 502);
  });

  it('is not an open proxy: paths off the allow-list are refused before any request leaves', async () => {
    for (const p of ['/api/v1/namespaces/team-a/secrets', '/api/v1/nodes', '/apis/kruntimes.io/v1alpha1/runs']) {
      const r = await request(`${d.origin}/api/get?path=${encodeURIComponent(p)}`, { headers: { cookie } });
      assert.equal(r.status, 400, p);
      assert.equal((JSON.parse(r.body) as { reason: string }).reason, 'NotAllowed');
    }
    const w = await request(`${d.origin}/api/watch?path=%2Fapi%2Fv1%2Fnodes`, { headers: { cookie } });
    assert.equal(w.status, 400);
  });
});
