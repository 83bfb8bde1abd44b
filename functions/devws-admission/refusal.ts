/**
 * Events for admission refusals (issue 14: "Events for every step transition and every refusal"),
 * pure. The API answer is the refusal; the Event is its record for whoever looks later with
 * `kubectl describe` or `kubectl get events`. It is attached to the object the refusal concerns
 * that exists: the Workspace or Project a refused Operation or Workspace was for, the object
 * itself on a refused update, and the refused object by name (no UID) when nothing exists yet.
 * Identical refusals within a minute share one Event name, so a client retrying in a loop cannot
 * flood the namespace; a dry run records nothing (the webhook declares NoneOnDryRun).
 */
import { API_VERSION, D, type Operation, type Workspace } from '../../lib/devws/api.ts';
import { eventObject, type Involved } from '../../lib/fn/events.ts';
import type { AdmissionRequest, AdmissionResult, Resource } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';

/** Identical refusals within this window are one Event. */
export const REFUSAL_WINDOW_MS = 60_000;

export interface Subject {
  resource: Resource;
  name: string;
}

/**
 * The existing objects a refusal may be recorded on, most specific first (the caller takes the
 * first that exists): an Operation's Workspace then its Project, a new Workspace's Project.
 * Empty when the request's own old object is the subject (an update) or nothing else is named.
 */
export function refusalSubjects(req: AdmissionRequest): Subject[] {
  if (req.operation !== 'CREATE' || !req.object) return [];
  const kind = req.kind.kind;
  if (kind === 'Operation') {
    const op = req.object as Operation;
    const ws: Subject[] = op.spec?.workspace ? [{ resource: D.workspaces, name: op.spec.workspace }] : [];
    return op.spec?.project ? [...ws, { resource: D.projects, name: op.spec.project }] : ws;
  }
  if (kind === 'Workspace') {
    const ws = req.object as Workspace;
    return ws.spec?.project ? [{ resource: D.projects, name: ws.spec.project }] : [];
  }
  return [];
}

const nameOf = (o: KubeObject | undefined): string => o?.metadata.name || o?.metadata.generateName || '';

/** What was refused, in words: `Operation stop-x (stop)`, `Workspace p1-main`. */
function refused(req: AdmissionRequest): string {
  const o = req.object ?? req.oldObject;
  const name = req.name || nameOf(o);
  const opKind = req.kind.kind === 'Operation' ? (o as Operation | undefined)?.spec?.kind : undefined;
  return `${req.kind.kind} ${name}${opKind ? ` (${opKind})` : ''}`;
}

function involvedFor(req: AdmissionRequest, subject: KubeObject | undefined): Involved {
  const own = req.operation === 'UPDATE' ? req.oldObject : undefined;
  const o = subject ?? own;
  if (o) return { apiVersion: o.apiVersion ?? API_VERSION, kind: o.kind ?? req.kind.kind, ...idOf(o, req) };
  return { apiVersion: API_VERSION, kind: req.kind.kind, name: req.name || nameOf(req.object), ...nsOf(req), uid: '' };
}

const nsOf = (req: AdmissionRequest): { namespace?: string } =>
  req.namespace || req.object?.metadata.namespace ? { namespace: req.namespace || req.object?.metadata.namespace } : {};

function idOf(o: KubeObject, req: AdmissionRequest): { name: string; namespace?: string; uid: string } {
  const namespace = o.metadata.namespace || req.namespace;
  return { name: o.metadata.name ?? '', ...(namespace ? { namespace } : {}), uid: o.metadata.uid ?? '' };
}

/**
 * The Event that records a refusal (undefined for an allowed request or a dry run): Warning
 * `<Kind>Refused` on the subject (see refusalSubjects; for an update the object itself), its
 * message naming what was refused, for whom, and the refusal with its stable reason.
 */
export function refusalEvent(
  req: AdmissionRequest,
  result: AdmissionResult,
  subject: KubeObject | undefined,
  now: Date,
): (KubeObject & Record<string, unknown>) | undefined {
  if (result.allowed || req.dryRun) return undefined;
  const verb = req.operation === 'CREATE' ? 'creating' : req.operation.toLowerCase();
  const refusal = `${result.code ?? 403} ${result.message ?? result.reason ?? 'denied'}`;
  const message = `${verb} ${refused(req)} refused for ${req.userInfo.username}: ${refusal}`;
  const bucket = Math.floor(now.getTime() / REFUSAL_WINDOW_MS);
  const involved = involvedFor(req, subject);
  const spec = { type: 'Warning' as const, reason: `${req.kind.kind}Refused`, message, key: `${message}|${bucket}` };
  return eventObject(involved, spec, now, 'devws-admission');
}
