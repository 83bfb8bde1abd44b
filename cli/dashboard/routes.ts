/** The dashboard's API: allow-listed reads, watch and log streams, artifacts, access checks and the actions. */
import express, { type Request, type Response, type Router } from 'express';
import type { KubeClient } from '../../lib/kube/client.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { renderRun } from '../wf/commands.ts';
import { allowedRead, artifactsPath, checkName, KRT, logsPath, PathRefused } from './paths.ts';
import { followToStream, refusal, watchToStream } from './sse.ts';

type Handler = (req: Request, res: Response) => Promise<void> | void;

/** Errors as JSON the UI shows: the API server's code, reason and message (never a token or header). */
function handle(fn: Handler): Handler {
  return async (req, res) => {
    try {
      await fn(req, res);
    } catch (err) {
      if (res.headersSent) return void res.end();
      if (err instanceof PathRefused) res.status(400).json({ code: 400, reason: 'NotAllowed', message: err.message });
      else {
        const r = refusal(err);
        res.status(r.code).json(r);
      }
    }
  };
}

export interface AccessCheck {
  namespace: string;
  verb: string;
  group?: string;
  resource: string;
  subresource?: string;
  name?: string;
}

/** One SelfSubjectAccessReview per check, as the user: the UI hides what these deny. */
async function access(client: KubeClient, checks: AccessCheck[]): Promise<boolean[]> {
  if (!Array.isArray(checks) || checks.length > 32) throw new PathRefused('access: send at most 32 checks');
  return Promise.all(
    checks.map(async (c) => {
      const r = await client.create<KubeObject & { status?: { allowed?: boolean } }>(
        '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
        {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SelfSubjectAccessReview',
          spec: {
            resourceAttributes: {
              namespace: checkName('namespace', c.namespace),
              verb: String(c.verb),
              group: String(c.group ?? 'kruntimes.io'),
              resource: String(c.resource),
              ...(c.subresource ? { subresource: String(c.subresource) } : {}),
              ...(c.name ? { name: String(c.name) } : {}),
            },
          },
        },
      );
      return r.status?.allowed === true;
    }),
  );
}

function actions(client: KubeClient, r: Router): void {
  const cancel = (plural: string): Handler =>
    handle(async (req, res) => {
      const ns = checkName('namespace', req.params.ns);
      const name = checkName(plural, req.params.name);
      await client.patch(`${KRT}/namespaces/${ns}/${plural}/${name}`, { spec: { cancelRequested: true } });
      res.json({ ok: true });
    });
  r.post('/runs/:ns/:name/cancel', cancel('runs'));
  r.post('/workflowruns/:ns/:name/cancel', cancel('workflowruns'));
  r.post(
    '/workflows/:ns/:name/trigger',
    handle(async (req, res) => {
      const ns = checkName('namespace', req.params.ns);
      const wf = await client.get<Parameters<typeof renderRun>[0]>(
        `${KRT}/namespaces/${ns}/workflows/${checkName('workflow', req.params.name)}`,
      );
      const body = (req.body ?? {}) as { inputs?: Record<string, string> };
      const created = await client.create(`${KRT}/namespaces/${ns}/workflowruns`, renderRun(wf, body.inputs ?? {}));
      res.json({ name: created.metadata.name });
    }),
  );
}

function artifacts(client: KubeClient, r: Router): void {
  r.get(
    '/artifacts/:ns/:run',
    handle(async (req, res) => {
      const base = artifactsPath(checkName('namespace', req.params.ns), checkName('run', req.params.run));
      res.json(await client.request('GET', base));
    }),
  );
  r.get(
    '/artifacts/:ns/:run/:name',
    handle(async (req, res) => {
      const base = artifactsPath(checkName('namespace', req.params.ns), checkName('run', req.params.run));
      const name = String(req.params.name);
      const up = await client.stream(`${base}/${encodeURIComponent(name)}`, { accept: '*/*' });
      const file = name.replace(/[^A-Za-z0-9._-]/g, '_');
      res.set({
        'Content-Type': 'application/octet-stream',
        'Content-Disposition': `attachment; filename="${file}"`,
        ...(up.headers['content-length'] ? { 'Content-Length': up.headers['content-length'] } : {}),
      });
      up.pipe(res);
    }),
  );
}

export function apiRoutes(client: KubeClient, namespace: string): Router {
  const r = express.Router();
  r.use(express.json({ limit: '64kb' }));
  r.get('/config', (_req, res) => void res.json({ namespace }));
  r.get(
    '/get',
    handle(async (req, res) => {
      const { path, query } = allowedRead(req.query.path, req.query);
      res.json(await client.request('GET', path, { query }));
    }),
  );
  r.get(
    '/watch',
    handle((req, res) => {
      const { path, query } = allowedRead(req.query.path, req.query);
      watchToStream(client, path, query, req, res);
    }),
  );
  r.get(
    '/logs/:ns/:run',
    handle(async (req, res) => {
      const path = logsPath(checkName('namespace', req.params.ns), checkName('run', req.params.run));
      const cursor = req.get('last-event-id') ?? (typeof req.query.cursor === 'string' ? req.query.cursor : undefined);
      await followToStream(client, path, cursor || undefined, req, res);
    }),
  );
  r.post(
    '/access',
    handle(async (req, res) => {
      res.json(await access(client, (req.body as { checks: AccessCheck[] }).checks));
    }),
  );
  artifacts(client, r);
  actions(client, r);
  return r;
}
