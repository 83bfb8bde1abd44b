/**
 * The dashboard in a cluster (`kruntimes dashboard`, kustomize/components/dashboard): the same UI
 * and API as `krt dashboard`, each request acting as the signed-in user's own bearer token, never
 * as the server's (its Pod mounts no ServiceAccount token and is bound to no role). Two modes:
 * - token: the user pastes a token (e.g. `kubectl create token`, an OIDC id token); the API server
 *   checks it (SelfSubjectReview) and it is kept sealed (AES-256-GCM, a key only this server holds)
 *   in an HttpOnly, Secure, SameSite=Strict cookie, forwarded only server-side;
 * - proxy: behind the cluster's auth proxy (e.g. oauth2-proxy), which sends the user's token as
 *   `Authorization: Bearer`; without it a request is refused.
 * Both: the public URL's Host only (421), actions need its Origin and the CSRF header, strict CSP.
 * It serves HTTPS only, with the certificate the tls-certificates function issues for its Service
 * (reloaded on rotation, ./tls.ts): the hop from the Ingress or auth proxy is encrypted too.
 * Tokens are never logged.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import express, { type NextFunction, type Request, type Response } from 'express';
import { KubeClient } from '../../lib/kube/client.ts';
import { isApiError } from '../../lib/kube/errors.ts';
import { cookieOf, CSP, csrfOk, dashboardApp, listen, refuseCsrf, securityHeaders, type Dashboard } from './server.ts';
import { secureServer, type ReloadEvent, type ServingTls } from './tls.ts';

export const SESSION_COOKIE = '__Host-krt_dashboard';
export type AuthMode = 'token' | 'proxy';

export interface InClusterOptions {
  /** The API server and its CA only: no credentials of its own are ever used. */
  base: KubeClient;
  auth: AuthMode;
  /** The serving certificate and key (PEM files, reloaded when they change): HTTPS only. */
  tls: ServingTls;
  /** What a certificate reload did (the component logs it). */
  onReload?: (e: ReloadEvent) => void;
  /** The URL users open (https://dashboard.example.com); without it: https://127.0.0.1:<port> (tests). */
  url?: string;
  listenHost?: string;
  port?: number;
  namespace?: string;
  /** The cookie sealing key (32 bytes); a fresh one per process by default (sign in again after a restart). */
  key?: Buffer;
  sessionSeconds?: number;
}

/** Seals a token for the cookie: iv . tag . ciphertext, base64url. */
export function seal(key: Buffer, token: string): string {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  const body = Buffer.concat([c.update(token, 'utf8'), c.final()]);
  return Buffer.concat([iv, c.getAuthTag(), body]).toString('base64url');
}

/** The token in a sealed cookie, or undefined when it was not sealed with `key` (or was altered). */
export function unseal(key: Buffer, sealed: string): string | undefined {
  const raw = Buffer.from(sealed, 'base64url');
  if (raw.length < 29) return undefined;
  try {
    const d = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
    d.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([d.update(raw.subarray(28)), d.final()]).toString('utf8');
  } catch {
    return undefined;
  }
}

const LOGIN_CSP = CSP.replace("form-action 'none'", "form-action 'self'");
/**
 * The sign-in page's headers: its form may post to itself only, and its referrer policy lets the
 * post carry the page's Origin (under no-referrer a browser sends `Origin: null` with a form post,
 * and the login CSRF check would refuse every sign-in).
 */
const loginHeaders = (res: Response): Response =>
  res.set({ 'Content-Security-Policy': LOGIN_CSP, 'Referrer-Policy': 'same-origin' });

function loginPage(problem = ''): string {
  const p = problem ? `<p class="refused" role="alert">${problem}</p>` : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8" /><title>kruntimes dashboard: sign in</title>
<link rel="stylesheet" href="/app.css" /></head>
<body><main class="login"><h1>kruntimes dashboard</h1>${p}
<form method="post" action="/login">
<label>Your Kubernetes bearer token (<code>kubectl create token &lt;sa&gt;</code>, or your OIDC id token)
<input type="password" name="token" autocomplete="off" required /></label>
<button type="submit">Sign in</button></form>
<p class="muted">The token is checked by the API server and kept only in an HttpOnly, Secure cookie; every request is made as you.</p>
</main></body></html>`;
}

/** Who the token belongs to, asked of the API server (SelfSubjectReview); undefined when it refuses the token. */
async function whoami(base: KubeClient, token: string): Promise<string | undefined> {
  try {
    const r = await base
      .withToken(token)
      .create<{ metadata: object; status?: { userInfo?: { username?: string } } }>(
        '/apis/authentication.k8s.io/v1/selfsubjectreviews',
        { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
      );
    return r.status?.userInfo?.username ?? '';
  } catch (err) {
    if (isApiError(err) && err.code === 401) return undefined;
    throw err;
  }
}

interface Ctx {
  o: InClusterOptions;
  key: Buffer;
  host: string;
  origin: string;
}

function signIn(ctx: Ctx) {
  const form = express.urlencoded({ extended: false, limit: '16kb' });
  const page = (res: Response, code: number, problem?: string): void =>
    void loginHeaders(res).status(code).type('html').send(loginPage(problem));
  return (req: Request, res: Response): void => {
    if (req.method === 'GET') return page(res, 200);
    // Login CSRF: only the page's own form may sign a browser in.
    if (req.headers.origin !== ctx.origin) return refuseCsrf(res);
    form(req, res, () => {
      const given = (req.body as { token?: unknown } | undefined)?.token;
      const token = typeof given === 'string' ? given.trim() : '';
      whoami(ctx.o.base, token).then(
        (user) => {
          if (!token || user === undefined) return page(res, 401, 'The API server did not accept this token.');
          res.cookie(SESSION_COOKIE, seal(ctx.key, token), {
            httpOnly: true,
            secure: true,
            sameSite: 'strict',
            path: '/',
            maxAge: (ctx.o.sessionSeconds ?? 8 * 3600) * 1000,
          });
          res.redirect(303, '/');
        },
        () => page(res, 502, 'Could not reach the API server to check the token; try again.'),
      );
    });
  };
}

/** The signed-in user's token for this request (cookie or auth proxy header), or undefined. */
function tokenOf(ctx: Ctx, req: Request): string | undefined {
  if (ctx.o.auth === 'proxy') return /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1];
  const sealed = cookieOf(req, SESSION_COOKIE);
  return sealed ? unseal(ctx.key, sealed) : undefined;
}

function notSignedIn(ctx: Ctx, req: Request, res: Response): void {
  if (ctx.o.auth === 'token' && req.method === 'GET' && !req.path.startsWith('/api/'))
    return res.redirect(303, '/login');
  const message =
    ctx.o.auth === 'proxy'
      ? 'no user token: the dashboard expects the auth proxy to send Authorization: Bearer'
      : 'not signed in: open /login';
  res.status(401).json({ code: 401, reason: 'Unauthorized', message });
}

function front(ctx: Ctx, tokens: WeakMap<Request, string>) {
  const login = signIn(ctx);
  return (req: Request, res: Response, next: NextFunction): void => {
    securityHeaders(res);
    if (req.path === '/healthz') return void res.type('text/plain').send('ok');
    if (req.headers.host !== ctx.host) return void res.status(421).type('text/plain').send('wrong Host');
    if (ctx.o.auth === 'token' && req.path === '/app.css') return next();
    if (ctx.o.auth === 'token' && req.path === '/login') return login(req, res);
    if (ctx.o.auth === 'token' && req.path === '/logout' && req.method === 'POST') {
      if (req.headers.origin !== ctx.origin) return refuseCsrf(res);
      res.clearCookie(SESSION_COOKIE, { httpOnly: true, secure: true, sameSite: 'strict', path: '/' });
      return res.redirect(303, '/login');
    }
    const token = tokenOf(ctx, req);
    if (!token) return notSignedIn(ctx, req, res);
    if (!csrfOk(req, ctx.origin)) return refuseCsrf(res);
    tokens.set(req, token);
    next();
  };
}

/** Starts the in-cluster server; every API request acts as its user's token on `o.base`'s API server. */
export async function startInClusterDashboard(o: InClusterOptions): Promise<Dashboard> {
  const tokens = new WeakMap<Request, string>();
  const ctx: Ctx = { o, key: o.key ?? randomBytes(32), host: '', origin: '' };
  const clientOf = (req: Request): KubeClient => o.base.withToken(tokens.get(req) ?? '');
  const app = dashboardApp(front(ctx, tokens), clientOf, o.namespace ?? 'default');
  const secure = secureServer(app, o.tls, o.onReload);
  const l = await listen(secure.server, o.listenHost ?? '0.0.0.0', o.port ?? 0).catch((err: unknown) => {
    secure.stop();
    throw err;
  });
  const url = new URL(o.url ?? `https://127.0.0.1:${l.port}`);
  ctx.host = url.host;
  ctx.origin = url.origin;
  const close = (): Promise<void> => {
    secure.stop();
    return l.close();
  };
  return { loginUrl: `${ctx.origin}/login`, origin: ctx.origin, close };
}

/** The in-cluster options from the environment (the component's Deployment sets them). */
export function inClusterOptions(env: NodeJS.ProcessEnv): InClusterOptions {
  const host = env.KUBERNETES_SERVICE_HOST;
  if (!host) throw new Error('not running in a cluster: KUBERNETES_SERVICE_HOST is not set');
  const url = env.KRT_DASHBOARD_URL;
  if (!url || !/^https:\/\//.test(url))
    throw new Error('KRT_DASHBOARD_URL must be the https:// address users open (the cookie is Secure)');
  const auth = env.KRT_DASHBOARD_AUTH ?? 'token';
  if (auth !== 'token' && auth !== 'proxy') throw new Error(`KRT_DASHBOARD_AUTH=${auth}: token or proxy`);
  const h = host.includes(':') ? `[${host}]` : host;
  const ca = readFileSync(env.KRT_DASHBOARD_KUBE_CA ?? '/etc/kruntimes/kube-ca/ca.crt');
  const keyFile = env.KRT_DASHBOARD_COOKIE_KEY_FILE;
  return {
    base: new KubeClient({ server: `https://${h}:${env.KUBERNETES_SERVICE_PORT ?? '443'}`, ca }),
    auth,
    tls: {
      certFile: env.KRT_DASHBOARD_TLS_CERT ?? '/etc/kruntimes/tls/tls.crt',
      keyFile: env.KRT_DASHBOARD_TLS_KEY ?? '/etc/kruntimes/tls/tls.key',
    },
    url,
    port: Number(env.KRT_DASHBOARD_PORT ?? '8443'),
    namespace: env.KRT_DASHBOARD_NAMESPACE ?? 'default',
    ...(keyFile ? { key: createHash('sha256').update(readFileSync(keyFile)).digest() } : {}),
  };
}
