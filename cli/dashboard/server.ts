/**
 * The dashboard server (`krt dashboard`): serves the bundled UI and a small API that forwards
 * to the Kubernetes API and the aggregated logs/artifacts APIs with the caller's own
 * kubeconfig identity, like `kubectl proxy`, but only the allow-listed reads and four actions.
 * Browser-facing hardening: 127.0.0.1 only, a login token exchanged for an HttpOnly
 * SameSite=Strict cookie, Host checked (DNS rebinding), Origin + CSRF header on actions, and a
 * strict CSP without inline scripts. Tokens are never logged.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { KubeClient } from '../../lib/kube/client.ts';
import { REPO_ROOT } from '../../localenv/paths.ts';
import { apiRoutes, type ClientOf } from './routes.ts';

export const UI_DIST = join(REPO_ROOT, 'ui', 'dist');
export const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');
const COOKIE = 'krt_dashboard';

export interface Dashboard {
  /** The URL to open: carries the login token (exchanged for the session cookie). */
  loginUrl: string;
  origin: string;
  close: () => Promise<void>;
}

const sameSecret = (a: string, b: string): boolean =>
  a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

export function cookieOf(req: Request, name: string): string {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return v.join('=');
  }
  return '';
}

/** Security headers on every answer (`csp`: the strict policy unless a page needs one more source). */
export function securityHeaders(res: Response, csp = CSP): void {
  res.set({
    'Content-Security-Policy': csp,
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    'Cross-Origin-Opener-Policy': 'same-origin',
  });
}

/** An action (any method but GET) needs the page's own Origin and the CSRF header. */
export function csrfOk(req: Request, origin: string): boolean {
  return req.method === 'GET' || (req.headers.origin === origin && req.headers['x-krt-csrf'] === '1');
}

export function refuseCsrf(res: Response): void {
  res.status(403).json({ code: 403, reason: 'CSRF', message: 'cross-site request refused' });
}

function guard(state: { host: string; origin: string; session: string; login: string }) {
  return (req: Request, res: Response, next: NextFunction): void => {
    securityHeaders(res);
    if (req.headers.host !== state.host) {
      res.status(421).type('text/plain').send('wrong Host: open the address krt dashboard printed');
      return;
    }
    if (req.path === '/login') {
      if (!sameSecret(typeof req.query.token === 'string' ? req.query.token : '', state.login)) {
        res.status(401).type('text/plain').send('invalid login token: open the address krt dashboard printed');
        return;
      }
      res.cookie(COOKIE, state.session, { httpOnly: true, sameSite: 'strict', path: '/' });
      res.redirect(303, '/');
      return;
    }
    if (!sameSecret(cookieOf(req, COOKIE), state.session)) {
      res.status(401).type('text/plain').send('not logged in: open the address krt dashboard printed');
      return;
    }
    if (!csrfOk(req, state.origin)) return refuseCsrf(res);
    next();
  };
}

/** The UI and the API behind `front` (the mode's authentication), acting as `clientOf(req)`. */
export function dashboardApp(
  front: (req: Request, res: Response, next: NextFunction) => void,
  clientOf: ClientOf,
  namespace: string,
): express.Express {
  if (!existsSync(join(UI_DIST, 'app.js')))
    throw new Error(`the dashboard bundle is missing (${UI_DIST}): build it with npx tsx scripts/build-ui.ts`);
  const app = express();
  app.disable('x-powered-by');
  app.use(front);
  app.get('/favicon.ico', (_req, res) => void res.status(204).end());
  app.use('/api', apiRoutes(clientOf, namespace));
  app.use(express.static(UI_DIST, { index: 'index.html', maxAge: 0 }));
  return app;
}

/** Listens on `host`:`port` (0: any free port); resolves with the port and a close function. */
export async function listen(
  server: Server,
  host: string,
  port: number,
): Promise<{ port: number; close: () => Promise<void> }> {
  server.listen(port, host);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Starts the server on 127.0.0.1:`port` (0: any free port) acting as `client`'s identity. */
export async function startDashboard(
  client: KubeClient,
  opts: { port?: number; namespace?: string } = {},
): Promise<Dashboard> {
  const state = {
    host: '',
    origin: '',
    session: randomBytes(32).toString('base64url'),
    login: randomBytes(24).toString('base64url'),
  };
  const app = dashboardApp(guard(state), () => client, opts.namespace ?? 'default');
  const l = await listen(createServer(app), '127.0.0.1', opts.port ?? 0);
  state.host = `127.0.0.1:${l.port}`;
  state.origin = `http://${state.host}`;
  return { loginUrl: `${state.origin}/login?token=${state.login}`, origin: state.origin, close: l.close };
}
