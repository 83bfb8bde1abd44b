/**
 * Validating admission for dev.kruntimes.io (ADR 0020), fail closed: Project input rules,
 * isolated Workspace baseRef and operation_in_progress, lifecycle Operation requests and explicit
 * retries. Reads the Project, the Workspace and the namespace's Operations with the admission
 * context, then applies the pure review in core.ts. Every refusal is also recorded as an Event
 * (refusal.ts).
 */
import type { AdmissionContext, AdmissionRequest, AdmissionResult, FunctionDef } from '../../lib/fn/types.ts';
import { resourcePath } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { D, GROUP, type Operation, type Project, type Workspace } from '../../lib/devws/api.ts';
import { userMay } from '../../lib/fn/access.ts';
import { reviewOperation, reviewProject, reviewRetry, reviewWorkspace, reviewWorkspaceUpdate } from './core.ts';
import { NODE_REPORT, type FenceContext } from '../../lib/devws/node-report.ts';
import { R } from '../../lib/fn/resources.ts';
import { refusalEvent, refusalSubjects } from './refusal.ts';

interface OperationList extends KubeObject {
  items: Operation[];
}

async function operationsIn(ns: string, ctx: AdmissionContext): Promise<Operation[]> {
  return (await ctx.get<OperationList>(resourcePath(D.operations, ns)))?.items ?? [];
}

/** The Workspace's current Operation as a clone report is fenced against (only read for a changed report). */
async function currentOperation(
  ws: Workspace,
  ns: string,
  ctx: AdmissionContext,
): Promise<FenceContext['operation'] | undefined> {
  const name = ws.status?.operation?.name;
  if (!name || !ws.metadata.annotations?.[NODE_REPORT]) return undefined;
  const op = await ctx.get<Operation>(resourcePath(D.operations, ns, name));
  if (!op) return undefined;
  return {
    name,
    cloneAttempts: op.status?.cloneAttempts ?? 0,
    baseCommit: op.status?.cloneInput?.baseCommit,
    pluginIds: (op.status?.plugins ?? []).map((p) => p.id),
  };
}

/** Project delete is for admins only: the requester needs `delete` on the Project (SubjectAccessReview). */
function mayDeleteProject(req: AdmissionRequest, ns: string, name: string, ctx: AdmissionContext): Promise<boolean> {
  return userMay(ctx, req.userInfo, { namespace: ns, verb: 'delete', group: GROUP, resource: 'projects', name });
}

async function admitOperation(req: AdmissionRequest, ns: string, ctx: AdmissionContext): Promise<AdmissionResult> {
  const op = req.object as Operation;
  if (op.spec.kind === 'delete_project' && !(await mayDeleteProject(req, ns, op.spec.project, ctx))) {
    return {
      allowed: false,
      code: 403,
      reason: 'Forbidden',
      message: `admin_required: ${req.userInfo.username} may not delete Project ${op.spec.project} (needs delete on projects.${GROUP}, the admin role)`,
    };
  }
  const ws = op.spec.workspace
    ? await ctx.get<Workspace>(resourcePath(D.workspaces, ns, op.spec.workspace))
    : undefined;
  return reviewOperation(op, ws, await operationsIn(ns, ctx));
}

/**
 * A new Project: its repository rules, and a credentialRef only to a Secret its creator may read
 * (seed 002: a credential reference of one's own; 403 credential_forbidden), by SubjectAccessReview.
 */
async function admitProject(req: AdmissionRequest, ns: string, ctx: AdmissionContext): Promise<AdmissionResult> {
  const p = req.object as Project;
  const r = reviewProject(p);
  const ref = p.spec.repository.credentialRef;
  if (!r.allowed || !ref) return r;
  if (await userMay(ctx, req.userInfo, { namespace: ns, verb: 'get', group: '', resource: 'secrets', name: ref }))
    return r;
  return {
    allowed: false,
    code: 403,
    reason: 'Forbidden',
    message: `credential_forbidden: ${req.userInfo.username} may not read Secret ${ref}; a Project may name only a credential its creator may read`,
  };
}

async function admitWorkspace(req: AdmissionRequest, ns: string, ctx: AdmissionContext): Promise<AdmissionResult> {
  const ws = req.object as Workspace;
  if (req.operation === 'UPDATE' && req.oldObject) {
    return reviewWorkspaceUpdate(ws, req.oldObject as Workspace, req.userInfo, await currentOperation(ws, ns, ctx));
  }
  if (req.operation !== 'CREATE') return { allowed: true };
  const project = await ctx.get<Project>(resourcePath(D.projects, ns, ws.spec.project));
  return reviewWorkspace(ws, project, ws.spec.kind === 'isolated' ? await operationsIn(ns, ctx) : []);
}

async function review(req: AdmissionRequest, ctx: AdmissionContext): Promise<AdmissionResult> {
  if (!req.object || req.subResource) return { allowed: true };
  const ns = req.object.metadata.namespace ?? req.namespace ?? '';
  const kind = req.kind.kind;
  if (kind === 'Project' && req.operation === 'CREATE') return admitProject(req, ns, ctx);
  if (kind === 'Workspace') return admitWorkspace(req, ns, ctx);
  if (kind === 'Operation' && req.operation === 'CREATE') return admitOperation(req, ns, ctx);
  if (kind === 'Operation' && req.operation === 'UPDATE' && req.oldObject) {
    return reviewRetry(req.object as Operation, req.oldObject as Operation);
  }
  return { allowed: true };
}

/**
 * Records a refusal as an Event (refusal.ts) on the first of its subjects that exists. Best
 * effort, after the answer: the refusal itself is the API's answer, and an Event that cannot be
 * written (one already records it in this window, the API is busy) is left out.
 */
export async function recordRefusal(
  req: AdmissionRequest,
  result: AdmissionResult,
  ctx: AdmissionContext,
): Promise<void> {
  const ns = req.namespace ?? req.object?.metadata.namespace ?? '';
  try {
    let subject: KubeObject | undefined;
    for (const s of refusalSubjects(req)) {
      subject = await ctx.get<KubeObject>(resourcePath(s.resource, ns, s.name));
      if (subject) break;
    }
    const event = refusalEvent(req, result, subject, ctx.now);
    if (event) await ctx.post(resourcePath(R.events, event.metadata.namespace), event);
  } catch {
    // left out, as above
  }
}

/** The review; a refusal (not a dry run) is also recorded as an Event, without delaying the answer. */
export async function admit(req: AdmissionRequest, ctx: AdmissionContext): Promise<AdmissionResult> {
  const result = await review(req, ctx);
  if (!result.allowed && !req.dryRun) void recordRefusal(req, result, ctx);
  return result;
}

const fn: FunctionDef = {
  name: 'devws-admission',
  description:
    "Refuses invalid Projects (repository URL, default branch), Node reports not written by the Workspace's live sandbox for its current generation and epoch, isolated Workspaces with an unsynced baseRef, lifecycle Operations while another is unfinished for the Project or that do not fit the Workspace, and retries of operations that are not blocked or retry_wait.",
  trigger: {
    type: 'admission',
    webhook: 'validating',
    timeoutSeconds: 5,
    failurePolicy: 'Fail',
    // A refusal is recorded as an Event, except on a dry run.
    sideEffects: 'NoneOnDryRun',
    rules: [
      {
        apiGroups: [GROUP],
        apiVersions: ['v1alpha1'],
        resources: ['projects'],
        operations: ['CREATE'],
        scope: 'Namespaced',
      },
      {
        apiGroups: [GROUP],
        apiVersions: ['v1alpha1'],
        resources: ['workspaces'],
        operations: ['CREATE', 'UPDATE'],
        scope: 'Namespaced',
      },
      {
        apiGroups: [GROUP],
        apiVersions: ['v1alpha1'],
        resources: ['operations'],
        operations: ['CREATE', 'UPDATE'],
        scope: 'Namespaced',
      },
    ],
  },
  rbac: [
    { apiGroups: [GROUP], resources: ['projects', 'workspaces', 'operations'], verbs: ['get', 'list'] },
    { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
    { apiGroups: [''], resources: ['events'], verbs: ['create'] },
  ],
  handler: admit,
};
export default fn;
