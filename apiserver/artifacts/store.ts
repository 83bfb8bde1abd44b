/**
 * Opens the ArtifactStore a Run's artifacts were uploaded to, from the backend: the Run's
 * status.artifactStore snapshot (else its Runtime's spec.artifactStore). S3 is read with the
 * credentials Secret the Runtime names (the same keys runtimed receives through envFrom). The
 * Filesystem store lives on a PVC that only the Runtime's Pods mount, so it is read through their
 * runtimed (via-runtimed.ts).
 */
import { S3Client } from '@aws-sdk/client-s3';
import type { KubeClient } from '../../lib/kube/client.ts';
import { isApiError } from '../../lib/kube/errors.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { S3ArtifactStore, resolveS3Config, s3ClientConfig } from '../../runtimed/artifacts/s3-store.ts';
import type { ArtifactStore, RuntimeArtifactStoreSpec } from '../../runtimed/artifacts/store.ts';
import { ArtifactRequestError, s3Credentials } from './select.ts';
import { openViaRuntimed, type RuntimedTarget } from './via-runtimed.ts';

type RuntimeObj = KubeObject & { spec?: { artifactStore?: RuntimeArtifactStoreSpec } };
type SecretObj = KubeObject & { data?: Record<string, string> };

export async function storeSpecOf(client: KubeClient, ns: string, run: { name: string; runtime?: string; snapshot?: RuntimeArtifactStoreSpec }): Promise<RuntimeArtifactStoreSpec> {
  if (run.snapshot) return run.snapshot;
  const rt = run.runtime ? await client.get<RuntimeObj>(`/apis/kruntimes.io/v1alpha1/namespaces/${ns}/runtimes/${run.runtime}`).catch(() => undefined) : undefined;
  const spec = rt?.spec?.artifactStore;
  if (!spec) throw new ArtifactRequestError(409, 'Conflict', `Run ${ns}/${run.name} records no artifact store and its Runtime ${run.runtime ?? ''} has none; its artifacts cannot be located`);
  return spec;
}

async function secretData(client: KubeClient, ns: string, name: string): Promise<Record<string, string> | undefined> {
  try { return (await client.get<SecretObj>(`/api/v1/namespaces/${ns}/secrets/${name}`)).data; } catch (err) {
    if (isApiError(err, 404)) throw new ArtifactRequestError(500, 'InternalError', `the artifact store credentials Secret ${ns}/${name} does not exist; recreate it or fix the Runtime's spec.artifactStore.s3.credentialsSecretName`);
    throw err;
  }
}

/** The store to read from; the caller closes it with `close`. */
export async function openStore(client: KubeClient, ns: string, spec: RuntimeArtifactStoreSpec, fs?: RuntimedTarget): Promise<{ store: ArtifactStore; close: () => void }> {
  if (spec.driver === 'filesystem') {
    if (!fs) throw new ArtifactRequestError(501, 'NotImplemented', 'Filesystem artifact stores are read through the Runtime Pods, which this server cannot reach');
    const target = fs;
    const store: Pick<ArtifactStore, 'open'> = { open: (ref) => openViaRuntimed(target, ref) };
    return { store: store as ArtifactStore, close: () => undefined };
  }
  const cfg = resolveS3Config(spec.s3);
  const secret = spec.s3?.credentialsSecretName;
  const credentials = secret ? s3Credentials(await secretData(client, ns, secret), `${ns}/${secret}`) : undefined;
  const s3 = new S3Client({ ...s3ClientConfig(cfg), ...(credentials ? { credentials } : {}) });
  return { store: S3ArtifactStore.fromSpec(spec, { client: s3 }), close: () => s3.destroy() };
}
