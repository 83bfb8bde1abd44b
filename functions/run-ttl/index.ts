/** Deletes finished Runs ttlSecondsAfterFinished after their completionTime (requeued until due). */
import { R } from '../../lib/fn/resources.ts';
import type { FunctionDef, Operation, ReconcileInput } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { isTerminal, type RunStatus } from '../../lib/run/phases.ts';

interface RunObj extends KubeObject {
  spec: { ttlSecondsAfterFinished?: number };
  status?: RunStatus;
}

/** When a Run is due for deletion (epoch ms), or undefined when it never is (not finished, no TTL, being deleted). */
export function dueOf(o: KubeObject | undefined): number | undefined {
  const run = o as RunObj | undefined;
  const ttl = run?.spec?.ttlSecondsAfterFinished;
  if (!run || run.metadata.deletionTimestamp || !ttl || ttl <= 0 || !isTerminal(run.status?.phase)) return undefined;
  const done = Date.parse(run.status?.completionTime ?? '');
  return Number.isFinite(done) ? done + ttl * 1000 : undefined;
}

export function expire({ object, now }: ReconcileInput): Operation[] {
  const run = object as RunObj | undefined;
  const due = dueOf(run);
  if (!run || due === undefined) return [];
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
    // Only a finished Run with a TTL that is not being deleted has anything to delete; its deletion
    // (the update setting deletionTimestamp, the DELETED event) has nothing left to do.
    filter: (e) => e.type !== 'deleted' && dueOf(e.object) !== undefined,
    // Invoked when due, not on every write to a finished Run nor for every finished Run a relay
    // start or relist replays (a relist of N finished Runs was N invocations at once).
    dueAt: dueOf,
  },
  concurrency: 2,
  rbac: [{ apiGroups: ['kruntimes.io'], resources: ['runs'], verbs: ['get', 'list', 'watch', 'delete'] }],
  handler: expire,
};
export default fn;
