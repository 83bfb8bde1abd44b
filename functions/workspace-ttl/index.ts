/**
 * Cron function: the unused-TTL sweep of PersistentWorkspaces. A Bound DeleteAfterTTL
 * workspace with ttlSecondsAfterUnused whose lastUsedTime + TTL has passed and that no
 * non-terminal Run references is first marked Released (a status write guarded by its
 * resourceVersion: terminal for scheduling), then its deletion is requested (seed 000 cleanup
 * protocol, step 3). The finalizer keeps it until runtimed on the bound Pod deleted the directory,
 * or the controller finds it Lost. A nil TTL and Retain never expire. If the deletion request
 * fails after the status write, the workspace controller requests it for the Released workspace.
 */
import { R } from '../../lib/fn/resources.ts';
import type { CronInput, FunctionDef, Operation } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { isTerminal } from '../../lib/run/phases.ts';
import { dueAt, released, type Workspace } from '../workspace-controller/lifecycle.ts';

type RunObj = KubeObject & { spec: { workspace?: { name: string } }; status?: { phase?: string } };

export function sweep({ state, now }: CronInput): Operation[] {
  const nowIso = now.toISOString();
  const inUse = new Set(
    (state.list(R.runs) as RunObj[])
      .filter((r) => r.spec.workspace && !isTerminal(r.status?.phase))
      .map((r) => `${r.metadata.namespace}/${r.spec.workspace?.name}`),
  );
  return (state.list(R.persistentWorkspaces) as Workspace[])
    .filter((w) => {
      const at = dueAt(w);
      return at !== undefined && at <= now.getTime() && !inUse.has(`${w.metadata.namespace}/${w.metadata.name}`);
    })
    .flatMap((w): Operation[] => [
      { op: 'status', resource: R.persistentWorkspaces, object: { ...w, status: released(w, 'TTLExpired', nowIso) } },
      {
        op: 'delete',
        resource: R.persistentWorkspaces,
        namespace: w.metadata.namespace,
        name: w.metadata.name ?? '',
        uid: w.metadata.uid,
      },
    ]);
}

const fn: FunctionDef = {
  name: 'workspace-ttl',
  description: 'Deletes PersistentWorkspaces unused for longer than their ttlSecondsAfterUnused.',
  trigger: { type: 'cron', schedule: '* * * * *', reads: [{ resource: R.persistentWorkspaces }, { resource: R.runs }] },
  rbac: [
    { apiGroups: ['kruntimes.io'], resources: ['persistentworkspaces'], verbs: ['list', 'delete'] },
    { apiGroups: ['kruntimes.io'], resources: ['persistentworkspaces/status'], verbs: ['update'] },
    { apiGroups: ['kruntimes.io'], resources: ['runs'], verbs: ['list'] },
  ],
  handler: sweep,
};
export default fn;
