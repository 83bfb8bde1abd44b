/** Deletes finished Runs ttlSecondsAfterFinished after their completionTime (requeued until due). */
import { R } from '../../lib/fn/resources.ts';
import type { FunctionDef, Operation, ReconcileInput } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { isTerminal, type RunStatus } from '../../lib/run/phases.ts';

interface RunObj extends KubeObject {
  spec: { ttlSecondsAfterFinished?: number };
  status?: RunStatus;
}

export function expire({ object, now }: ReconcileInput): Operation[] {
  const run = object as RunObj | undefined;
  const ttl = run?.spec.ttlSecondsAfterFinished;
  if (!run || run.metadata.deletionTimestamp || !ttl || ttl <= 0 || !isTerminal(run.status?.phase)) return [];
  const done = Date.parse(run.status?.completionTime ?? '');
  if (!Number.isFinite(done)) return [];
  const due = done + ttl * 1000;
  if (due > now.getTime()) return [{ op: 'requeue', afterMs: due - now.getTime() }];
  return [
    {
      op: 'delete',
      resource: R.runs,
      namespace: run.metadata.namespace,
      name: run.metadata.name ?? '',
      uid: run.metadata.uid,
    },
  ];
}

const fn: FunctionDef = {
  name: 'run-ttl',
  description: 'Deletes finished Runs after spec.ttlSecondsAfterFinished.',
  trigger: {
    type: 'watch',
    resource: R.runs,
    filter: (e) =>
      isTerminal((e.object as RunObj).status?.phase) && !!(e.object as RunObj).spec?.ttlSecondsAfterFinished,
  },
  concurrency: 2,
  rbac: [{ apiGroups: ['kruntimes.io'], resources: ['runs'], verbs: ['get', 'list', 'watch', 'delete'] }],
  handler: expire,
};
export default fn;
