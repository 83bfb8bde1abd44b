/**
 * Where a Run's artifacts are: the Run's status.artifactStore snapshot (else its Runtime's
 * spec.artifactStore), and how the backend reads them: through a runtimed of the Runtime
 * (via-runtimed.ts), which has the S3 credentials (envFrom) or the Filesystem PVC mounted.
 */
import type { KubeClient } from '../../lib/kube/client.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import type { ArtifactStore, RuntimeArtifactStoreSpec } from '../../runtimed/artifacts/store.ts';
import { ArtifactRequestError } from './select.ts';
import { openViaRuntimed, type RuntimedTarget } from './via-runtimed.ts';

type RuntimeObj = KubeObject & { spec?: { artifactStore?: RuntimeArtifactStoreSpec } };

export async function storeSpecOf(
  client: KubeClient,
  ns: string,
  run: { name: string; runtime?: string; snapshot?: RuntimeArtifactStoreSpec },
): Promise<RuntimeArtifactStoreSpec> {
  if (run.snapshot) return run.snapshot;
  const rt = run.runtime
    ? await client
        .get<RuntimeObj>(`/apis/kruntimes.io/v1alpha1/namespaces/${ns}/runtimes/${run.runtime}`)
        .catch(() => undefined)
    : undefined;
  const spec = rt?.spec?.artifactStore;
  if (!spec)
    throw new ArtifactRequestError(
      409,
      'Conflict',
      `Run ${ns}/${run.name} records no artifact store and its Runtime ${run.runtime ?? ''} has none; its artifacts cannot be located`,
    );
  return spec;
}

/** The store to read from, always through a runtimed of the Run's Runtime: it already holds the
 * store's credentials (S3) or mount (Filesystem), so this backend needs no Secret and no volume. */
export function openStore(
  spec: RuntimeArtifactStoreSpec,
  via: RuntimedTarget | undefined,
): { store: Pick<ArtifactStore, 'open'>; close: () => void } {
  if (!via)
    throw new ArtifactRequestError(
      501,
      'NotImplemented',
      `${spec.driver} artifact stores are read through the Runtime's Pods, which this server cannot reach`,
    );
  return { store: { open: (ref) => openViaRuntimed(via, ref) }, close: () => undefined };
}
