/** The dashboard's API: allow-listed reads, watch and log streams, artifacts, access checks and the actions. */
import express, { type Request, type Response, type Router } from 'express';
import type { KubeClient } from '../../lib/kube/client.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { CallError } from '../../lib/workflow/calls.ts';
import { renderRun } from '../wf/commands.ts';
import { allowedRead, artifactsPath, checkName, DEV, KRT, logsPath, PathRefused } from './paths.ts';
import { followToStream, refusal, watchToStream } from './sse.ts';

type Handler = (req: Request, res: Response) => Promise<void> | void;
/** The user's client for a request: the kubeconfig's (krt dashboard) or the request's own token (in-cluster). */
export type ClientOf = (req: Request) => KubeClient;

/**
 * An error as the JSON the UI shows: the API server's code, reason and message (never a token or
 * header); a refused path is 400 NotAllowed, a Workflow's input refused when it is bound 400 InvalidInput.
 */
export function problem(err: unknown): { code: number; reason: string; message: string } {
  if (err instanceof PathRefused) return { code: 400, reason: 'NotAllowed', message: err.message };
  if (err instanceof CallError) return { code: 400, reason: 'InvalidInput', message: err.message };
  return refusal(err);
}

function handle(fn: Handler): Handler {
  return async (req, res) => {
    try {
      await fn(req, res);
    } catch (err) {
      if (res.headersSent) return void res.end();
      const r = problem(err);
      res.status(r.code).json(r);
    }
  };
}

/** A trigger's inputs: an object of strings (anything else is refused before the Workflow is read). */
export function triggerInputs(body: unknown): Record<string, string> {
  const inputs = (body ?? {}) as { inputs?: unknown };
  if (inputs.inputs === undefined) return {};
  const v = inputs.inputs;
  if (typeof v !== 'object' || v === null || Array.isArray(v) || Object.values(v).some((x) => typeof x !== 'string'))
    throw new CallError('input', 'inputs: send an object of strings');
  return v as Record<string, string>;
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

function actions(clientOf: ClientOf, r: Router): void {
  const cancel = (plural: string): Handler =>
    handle(async (req, res) => {
      const client = clientOf(req);
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
      const client = clientOf(req);
      const ns = checkName('namespace', req.params.ns);
      const inputs = triggerInputs(req.body);
      const wf = await client.get<Parameters<typeof renderRun>[0]>(
        `${KRT}/namespaces/${ns}/workflows/${checkName('workflow', req.params.name)}`,
      );
      const created = await client.create(`${KRT}/namespaces/${ns}/workflowruns`, renderRun(wf, inputs));
      res.json({ name: created.metadata.name });
    }),
  );
}

/** A developer Workspace's start/stop: an Operation of that kind (admission and the controller decide the rest). */
export function workspaceOperation(
  ws: { metadata: { name?: string }; spec?: { project?: string } },
  action: unknown,
): Record<string, unknown> {
  if (action !== 'start' && action !== 'stop') throw new PathRefused(`action ${JSON.stringify(action)}: start or stop`);
  const name = ws.metadata.name ?? '';
  return {
    apiVersion: 'dev.kruntimes.io/v1alpha1',
    kind: 'Operation',
    metadata: { generateName: `${name.slice(0, 40)}-${action}-` },
    spec: { kind: action, project: ws.spec?.project ?? '', workspace: name },
  };
}

function devActions(clientOf: ClientOf, r: Router): void {
  r.post(
    '/devworkspaces/:ns/:name/:action',
    handle(async (req, res) => {
      const client = clientOf(req);
      const ns = checkName('namespace', req.params.ns);
      const path = `${DEV}/namespaces/${ns}`;
      const action = req.params.action;
      // Refused before any request leaves (workspaceOperation checks it again).
      workspaceOperation({ metadata: {} }, action);
      const ws = await client.get<KubeObject & { spec?: { project?: string } }>(
        `${path}/workspaces/${checkName('workspace', req.params.name)}`,
      );
      const created = await client.create(`${path}/operations`, workspaceOperation(ws, action));
      res.json({ name: created.metadata.name });
    }),
  );
}

function artifacts(clientOf: ClientOf, r: Router): void {
  r.get(
    '/artifacts/:ns/:run',
    handle(async (req, res) => {
      const base = artifactsPath(checkName('namespace', req.params.ns), checkName('run', req.params.run));
      res.json(await clientOf(req).request('GET', base));
    }),
  );
  r.get(
    '/artifacts/:ns/:run/:name',
    handle(async (req, res) => {
      const base = artifactsPath(checkName('namespace', req.params.ns), checkName('run', req.params.run));
      const name = String(req.params.name);
      const up = await clientOf(req).stream(`${base}/${encodeURIComponent(name)}`, { accept: '*/*' });
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

export function apiRoutes(clientOf: ClientOf, namespace: string): Router {
  const r = express.Router();
  r.use(express.json({ limit: '64kb' }));
  r.get('/config', (_req, res) => void res.json({ namespace }));
  r.get(
    '/get',
    handle(async (req, res) => {
      const { path, query } = allowedRead(req.query.path, req.query);
      res.json(await clientOf(req).request('GET', path, { query }));
    }),
  );
  r.get(
    '/watch',
    handle((req, res) => {
      const { path, query } = allowedRead(req.query.path, req.query);
      watchToStream(clientOf(req), path, query, req, res);
    }),
  );
  r.get(
    '/logs/:ns/:run',
    handle(async (req, res) => {
      const path = logsPath(checkName('namespace', req.params.ns), checkName('run', req.params.run));
      const cursor = req.get('last-event-id') ?? (typeof req.query.cursor === 'string' ? req.query.cursor : undefined);
      await followToStream(clientOf(req), path, cursor || undefined, req, res);
    }),
  );
  r.post(
    '/access',
    handle(async (req, res) => {
      res.json(await access(clientOf(req), (req.body as { checks: AccessCheck[] }).checks));
    }),
  );
  artifacts(clientOf, r);
  actions(clientOf, r);
  devActions(clientOf, r);
  return r;
}
