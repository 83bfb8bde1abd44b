/**
 * runtimed's part of the PersistentWorkspace cleanup protocol: it watches only the workspaces
 * bound to its own Pod; when one is being deleted and no local non-terminal Run uses it, it
 * deletes /workspace/persistent/<name> and then removes the finalizer. It never writes status.
 */
import type { Logger } from 'pino';
import type { KubeClient } from '../lib/kube/client.ts';
import { isApiError } from '../lib/kube/errors.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { ListWatch } from '../lib/kube/watch.ts';
import { isUnsafePathError } from './artifacts/safe-dir.ts';
import { isTerminal } from '../lib/run/phases.ts';

export const WORKSPACE_FINALIZER = 'kruntimes.io/workspace-cleanup';

export interface WorkspaceCleanerDeps {
  client: KubeClient;
  namespace: string;
  podName: string;
  podUID: string;
  /** Deletes the workspace's directory (safe-dir.ts removeBeneath: no link followed, no mount crossed). */
  remove: (name: string) => Promise<void>;
  inUse: (name: string) => boolean;
  log: Logger;
}

export function startWorkspaceCleaner(d: WorkspaceCleanerDeps): { stop(): void; recheck(): void } {
  const busy = new Set<string>();
  const path = (ws: KubeObject): string =>
    `/apis/kruntimes.io/v1alpha1/namespaces/${d.namespace}/persistentworkspaces/${ws.metadata.name}`;
  const clean = async (ws: KubeObject & { status?: { boundPodUID?: string } }): Promise<void> => {
    const name = ws.metadata.name ?? '';
    if (!ws.metadata.deletionTimestamp || !(ws.metadata.finalizers ?? []).includes(WORKSPACE_FINALIZER)) return;
    if (ws.status?.boundPodUID && ws.status.boundPodUID !== d.podUID) return;
    if (d.inUse(name) || busy.has(name)) return;
    busy.add(name);
    try {
      await d.remove(name).catch((err: unknown) => {
        // A Run replaced a component of the path (or mounted something below it): what is there is
        // not the workspace's directory, and nothing is removed through it. Release anyway, loudly.
        if (!isUnsafePathError(err)) throw err;
        d.log.warn({ workspace: name, reason: err.reason, err: err.message }, 'workspace directory not removed');
      });
      await d.client.patch(path(ws), {
        metadata: {
          resourceVersion: ws.metadata.resourceVersion,
          finalizers: (ws.metadata.finalizers ?? []).filter((f) => f !== WORKSPACE_FINALIZER),
        },
      });
      d.log.info({ workspace: name }, 'deleted workspace directory and released its finalizer');
    } catch (err) {
      if (!isApiError(err, 404)) {
        d.log.warn({ err, workspace: name }, 'workspace cleanup failed; retrying');
        setTimeout(() => {
          void refresh(name);
        }, 2000);
      }
    } finally {
      busy.delete(name);
    }
  };
  const refresh = async (name: string): Promise<void> => {
    try {
      await clean(await d.client.get(path({ metadata: { name } })));
    } catch (err) {
      if (!isApiError(err, 404)) d.log.warn({ err }, 'workspace refresh failed');
    }
  };
  const watch = new ListWatch<KubeObject>(
    d.client,
    {
      path: `/apis/kruntimes.io/v1alpha1/namespaces/${d.namespace}/persistentworkspaces`,
      fieldSelector: `status.boundPod=${d.podName}`,
      onError: (err) => d.log.warn({ err }, 'workspace watch error'),
    },
    (delta) => {
      if (delta.type !== 'deleted') void clean(delta.object);
    },
  );
  watch.start();
  return {
    stop: () => watch.stop(),
    /** After a local Run ended: workspaces waiting for it may be cleaned now. */
    recheck: () => {
      for (const ws of watch.store.list()) void clean(ws);
    },
  };
}

/**
 * "Still in use" from Run status, not only from this runtimed's memory (a Run it has not picked up
 * yet, or one it forgot across a restart, still counts): a workspace is in use while any Run
 * assigned to this Pod that references it is not terminal.
 */
export function usedByAssignedRuns(
  name: string,
  podUID: string,
  runs: readonly { spec: { workspace?: { name: string } }; status?: { phase?: string; assignedPodUID?: string } }[],
): boolean {
  return runs.some(
    (r) =>
      r.spec.workspace?.name === name &&
      !isTerminal(r.status?.phase) &&
      (!r.status?.assignedPodUID || r.status.assignedPodUID === podUID),
  );
}
