/**
 * Admission: a Run created with spec.workspace must name an existing PersistentWorkspace of the
 * same Runtime, and its creator must hold `use` on persistentworkspaces/use for that workspace
 * (SubjectAccessReview for the requesting user, groups and extra, about 2 s). The Workflow
 * controller's ServiceAccount has no blanket `use`: it passes only for its own child Runs, when
 * the Run and the workspace are controller-owned by the same live WorkflowRun UID with matching
 * WorkflowRun-UID and job labels. Any error denies (fail closed).
 */
import { R } from '../../lib/fn/resources.ts';
import {
  resourcePath,
  type AdmissionContext,
  type AdmissionRequest,
  type AdmissionResult,
  type FunctionDef,
  type Resource,
} from '../../lib/fn/types.ts';
import type { KubeObject, OwnerReference } from '../../lib/kube/types.ts';
import { CONTROLLER_SERVICE_ACCOUNT, JOB_LABEL, WORKFLOWRUN_UID_LABEL } from '../../lib/workflow/labels.ts';

interface RunObj extends KubeObject {
  spec?: { runtime?: string; workspace?: { name: string } };
}
interface WsObj extends KubeObject {
  spec: { runtime: string };
  status?: { phase?: string };
}

const deny = (message: string, code = 403, reason = 'Forbidden'): AdmissionResult => ({
  allowed: false,
  code,
  reason,
  message,
});
const controllerOf = (o: KubeObject): OwnerReference | undefined =>
  o.metadata.ownerReferences?.find((r) => r.controller);

/** The controller path: both objects owned by the same live WorkflowRun, labels matching. Returns a denial reason or undefined. */
export function controllerPathProblem(run: RunObj, ws: WsObj, wfr: KubeObject | undefined): string | undefined {
  const ro = controllerOf(run);
  const wo = controllerOf(ws);
  if (ro?.kind !== 'WorkflowRun' || wo?.kind !== 'WorkflowRun')
    return 'the Run and the workspace must both be controller-owned by a WorkflowRun';
  if (ro.uid !== wo.uid) return 'the Run and the workspace belong to different WorkflowRuns';
  const uid = ro.uid;
  if (run.metadata.labels?.[WORKFLOWRUN_UID_LABEL] !== uid || ws.metadata.labels?.[WORKFLOWRUN_UID_LABEL] !== uid)
    return `the ${WORKFLOWRUN_UID_LABEL} labels do not match the owning WorkflowRun UID`;
  const job = run.metadata.labels?.[JOB_LABEL];
  if (!job || ws.metadata.labels?.[JOB_LABEL] !== job) return 'the Run and the workspace belong to different jobs';
  if (!wfr || wfr.metadata.uid !== uid || wfr.metadata.deletionTimestamp)
    return 'the owning WorkflowRun no longer exists (stale UID)';
  return undefined;
}

/**
 * The object from the relay's informer cache when it holds it, else from the API server. A cached
 * copy may lag by a watch delivery; what it could let through is what the scheduler checks again
 * (a workspace deleted meanwhile leaves the Run Pending) or the garbage collector removes (a child
 * of a WorkflowRun deleted meanwhile); a missing object is always read live.
 */
export async function cachedOrGet<T extends KubeObject>(
  ctx: Pick<AdmissionContext, 'get' | 'cached'>,
  r: Resource,
  ns: string,
  name: string,
): Promise<T | undefined> {
  return (ctx.cached?.(r, ns, name) as T | undefined) ?? ctx.get<T>(resourcePath(r, ns, name));
}

async function useReview(
  req: AdmissionRequest,
  ns: string,
  name: string,
  ctx: AdmissionContext,
): Promise<AdmissionResult> {
  const u = req.userInfo;
  let res: { status?: { allowed?: boolean; reason?: string; evaluationError?: string } };
  try {
    res = await ctx.post('/apis/authorization.k8s.io/v1/subjectaccessreviews', {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: {
        user: u.username,
        ...(u.uid ? { uid: u.uid } : {}),
        groups: u.groups ?? [],
        extra: u.extra ?? {},
        resourceAttributes: {
          namespace: ns,
          verb: 'use',
          group: 'kruntimes.io',
          resource: 'persistentworkspaces',
          subresource: 'use',
          name,
        },
      },
    });
  } catch (err) {
    return deny(
      `spec.workspace.name: could not verify permission to use PersistentWorkspace "${name}" (${err instanceof Error ? err.message : String(err)}); the Run is rejected, retry`,
      503,
      'ServiceUnavailable',
    );
  }
  if (res.status?.allowed) return { allowed: true };
  return deny(
    `spec.workspace.name: ${u.username} may not use PersistentWorkspace "${name}" in namespace ${ns}: missing permission verb "use" on resource "persistentworkspaces/use" in API group "kruntimes.io" (grant it with a Role, optionally with resourceNames: ["${name}"])`,
  );
}

export async function admitRunWorkspace(req: AdmissionRequest, ctx: AdmissionContext): Promise<AdmissionResult> {
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion -- tsc needs it (the lint type service sees the index signature)
  const run = req.object as RunObj | undefined;
  const ref = run?.spec?.workspace;
  if (!run || !ref || req.operation !== 'CREATE') return { allowed: true };
  const ns = req.namespace ?? run.metadata.namespace ?? '';
  const owner = controllerOf(run);
  const viaController = req.userInfo.username === CONTROLLER_SERVICE_ACCOUNT && owner?.kind === 'WorkflowRun';
  // The workspace and (for the controller path) the owning WorkflowRun: from the informer cache
  // when it holds them, else read in parallel.
  const [ws, wfr] = await Promise.all([
    cachedOrGet<WsObj>(ctx, R.persistentWorkspaces, ns, ref.name),
    viaController ? cachedOrGet(ctx, R.workflowRuns, ns, owner.name) : Promise.resolve(undefined),
  ]);
  if (!ws)
    return deny(
      `spec.workspace.name: PersistentWorkspace "${ref.name}" does not exist in namespace ${ns}; create it before the Run`,
      422,
      'Invalid',
    );
  if (ws.spec.runtime !== run.spec?.runtime)
    return deny(
      `spec.workspace.name: PersistentWorkspace "${ref.name}" belongs to runtime "${ws.spec.runtime}", but the Run uses runtime "${run.spec?.runtime}"`,
      422,
      'Invalid',
    );
  if (ws.metadata.deletionTimestamp || ws.status?.phase === 'Released')
    return deny(
      `spec.workspace.name: PersistentWorkspace "${ref.name}" is being deleted (Released) and accepts no new Runs`,
      422,
      'Invalid',
    );
  if (req.userInfo.username === CONTROLLER_SERVICE_ACCOUNT) {
    const problem = controllerPathProblem(run, ws, wfr);
    return problem
      ? deny(
          `spec.workspace.name: the Workflow controller may only reference the job workspace of its own WorkflowRun: ${problem}`,
        )
      : { allowed: true };
  }
  return useReview(req, ns, ref.name, ctx);
}

const fn: FunctionDef = {
  name: 'run-workspace-use',
  description: 'Runs may reference only existing workspaces of their Runtime, and only with `use` permission on them.',
  trigger: {
    type: 'admission',
    webhook: 'validating',
    timeoutSeconds: 5,
    failurePolicy: 'Fail',
    rules: [
      {
        apiGroups: ['kruntimes.io'],
        apiVersions: ['v1alpha1'],
        resources: ['runs'],
        operations: ['CREATE'],
        scope: 'Namespaced',
      },
    ],
    matchConditions: [{ name: 'has-workspace', expression: 'has(object.spec.workspace)' }],
  },
  rbac: [
    { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
    { apiGroups: ['kruntimes.io'], resources: ['persistentworkspaces', 'workflowruns'], verbs: ['get'] },
  ],
  handler: admitRunWorkspace,
};
export default fn;
