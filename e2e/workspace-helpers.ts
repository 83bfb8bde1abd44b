/** PersistentWorkspace helpers shared by the workspace and seed 000 specs. */
import { isApiError } from '../lib/kube/errors.ts';
import { admin, eventually, type Obj } from './helpers.ts';
import { GROUP } from './runs-helpers.ts';

export type Ws = Obj & {
  status?: {
    phase?: string;
    boundPod?: string;
    boundPodUID?: string;
    path?: string;
    lastUsedTime?: string;
    conditions?: { type: string; status: string; reason: string; message: string }[];
  };
};

export const wsPath = (ns: string, name = ''): string =>
  `${GROUP}/namespaces/${ns}/persistentworkspaces${name ? `/${name}` : ''}`;

export const getWs = (ns: string, name: string): Promise<Ws> => admin().get<Ws>(wsPath(ns, name));

export async function createWs(ns: string, name: string, spec: Record<string, unknown>): Promise<void> {
  await admin().create(wsPath(ns), {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'PersistentWorkspace',
    metadata: { name },
    spec,
  });
}

/** The workspace once Bound with its cleanup finalizer in place. */
export async function bound(ns: string, name: string): Promise<Ws> {
  return eventually(`workspace ${name} Bound`, async () => {
    const w = await getWs(ns, name);
    return w.status?.phase === 'Bound' && (w.metadata.finalizers ?? []).length ? w : undefined;
  });
}

/** Waits until the object at path answers 404. */
export async function gone(path: string, what: string, timeoutMs = 60_000): Promise<void> {
  await eventually(
    `${what} to be gone`,
    async () => {
      try {
        await admin().get(path);
        return false;
      } catch (e) {
        return isApiError(e, 404);
      }
    },
    timeoutMs,
  );
}
