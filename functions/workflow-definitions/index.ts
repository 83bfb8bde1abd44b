/** Workflow and Action definitions: accepted (Ready=True) or rejected with the first problem found. */
import { R } from '../../lib/fn/resources.ts';
import type { FunctionDef, Operation, ReconcileInput } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { setCondition, type Condition } from '../../lib/run/conditions.ts';
import { actionProblem, workflowRunProblem, type JobsSpec } from '../../lib/workflow/core.ts';
import { sameJson } from '../../lib/kube/same-json.ts';

type Def = KubeObject & {
  kind?: string;
  spec: { jobs?: JobsSpec; steps?: unknown[] };
  status?: { conditions?: Condition[] };
};

export function accept({ key, object, now }: ReconcileInput): Operation[] {
  const d = object as Def | undefined;
  if (!d || d.metadata.deletionTimestamp) return [];
  const isAction = !d.spec.jobs;
  const problem = isAction
    ? actionProblem({ name: d.metadata.name ?? key, spec: d.spec } as never)
    : workflowRunProblem(d.spec.jobs ?? {});
  const message =
    problem ??
    (isAction
      ? 'Action definition accepted; execution is handled by WorkflowRun'
      : 'Workflow definition accepted; execution is handled by WorkflowRun');
  const conditions = setCondition(
    d.status?.conditions,
    {
      type: 'Ready',
      status: problem ? 'False' : 'True',
      reason: problem ? 'Invalid' : 'Accepted',
      message,
      ...(d.metadata.generation ? { observedGeneration: d.metadata.generation } : {}),
    },
    now.toISOString(),
  );
  if (sameJson(conditions, d.status?.conditions)) return [];
  return [
    {
      op: 'apply',
      resource: isAction ? R.actions : R.workflows,
      subresource: 'status',
      object: { metadata: { name: d.metadata.name, namespace: d.metadata.namespace }, status: { conditions } },
    },
  ];
}

const rbac = [
  { apiGroups: ['kruntimes.io'], resources: ['workflows', 'actions'], verbs: ['get', 'list', 'watch'] },
  { apiGroups: ['kruntimes.io'], resources: ['workflows/status', 'actions/status'], verbs: ['get', 'patch', 'update'] },
];

const fn: FunctionDef = {
  name: 'workflow-definitions',
  description: 'Marks Workflows and Actions Ready (accepted) or not, with the problem found.',
  trigger: { type: 'watch', resource: R.workflows },
  rbac,
  handler: accept,
};
export default fn;
