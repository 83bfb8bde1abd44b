/**
 * A dynamic provisioner for the StorageClass `kruntimes-local` (provisioner
 * kruntimes.io/local-dir): every claim gets a PersistentVolume backed by a local directory
 * that outlives the Pods using it, and is deleted (directory included) when released.
 * It runs in the node agent process with its own, least-privilege identity.
 */
import { chmodSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { KubeClient } from '../lib/kube/client.ts';
import { isApiError } from '../lib/kube/errors.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { ListWatch } from '../lib/kube/watch.ts';

export const PROVISIONER = 'kruntimes.io/local-dir';
export const STORAGE_CLASS = 'kruntimes-local';

interface Claim extends KubeObject {
  spec: {
    volumeName?: string;
    storageClassName?: string;
    accessModes?: string[];
    resources?: { requests?: { storage?: string } };
    volumeMode?: string;
  };
  status?: { phase?: string };
}
interface Volume extends KubeObject {
  spec: { persistentVolumeReclaimPolicy?: string; hostPath?: { path: string; type?: string }; [k: string]: unknown };
  status?: { phase?: string };
}

export function wantsVolume(c: Claim): boolean {
  const ann = c.metadata.annotations ?? {};
  const by = ann['volume.kubernetes.io/storage-provisioner'] ?? ann['volume.beta.kubernetes.io/storage-provisioner'];
  return (
    by === PROVISIONER &&
    !c.spec.volumeName &&
    !c.metadata.deletionTimestamp &&
    (c.status?.phase ?? 'Pending') === 'Pending'
  );
}

export function volumeFor(c: Claim, root: string): Volume & Record<string, unknown> {
  const name = `pvc-${c.metadata.uid}`;
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: {
      name,
      annotations: { 'pv.kubernetes.io/provisioned-by': PROVISIONER },
      labels: { 'kruntimes.io/provisioner': 'local-dir' },
    },
    spec: {
      capacity: { storage: c.spec.resources?.requests?.storage ?? '1Gi' },
      accessModes: c.spec.accessModes ?? ['ReadWriteOnce'],
      persistentVolumeReclaimPolicy: 'Delete',
      storageClassName: c.spec.storageClassName ?? STORAGE_CLASS,
      volumeMode: c.spec.volumeMode ?? 'Filesystem',
      hostPath: { path: join(root, name), type: 'DirectoryOrCreate' },
      claimRef: {
        apiVersion: 'v1',
        kind: 'PersistentVolumeClaim',
        namespace: c.metadata.namespace,
        name: c.metadata.name,
        uid: c.metadata.uid,
      },
    },
  };
}

/**
 * A new volume's directory, world-writable as local-dir provisioners create them (rancher's
 * local-path-provisioner: 0777): a kubelet applies no fsGroup to a hostPath volume, so a
 * non-root Pod (runtimed as 65532) could not write a root-owned 0755 directory. The mode is set
 * explicitly because mkdir's is masked by the umask.
 */
export function prepareVolumeDir(path: string): void {
  mkdirSync(path, { recursive: true });
  chmodSync(path, 0o777);
}

export class LocalDirProvisioner {
  private claims: ListWatch<Claim> | undefined;
  private volumes: ListWatch<Volume> | undefined;

  constructor(
    private readonly client: KubeClient,
    private readonly root: string,
    private readonly log: Logger,
  ) {}

  start(): void {
    mkdirSync(this.root, { recursive: true });
    const onError = (err: unknown): void => this.log.warn({ err }, 'provisioner watch error');
    this.claims = new ListWatch<Claim>(this.client, { path: '/api/v1/persistentvolumeclaims', onError }, (d) => {
      if (d.type !== 'deleted' && wantsVolume(d.object)) void this.provision(d.object);
    });
    this.volumes = new ListWatch<Volume>(
      this.client,
      { path: '/api/v1/persistentvolumes', labelSelector: 'kruntimes.io/provisioner=local-dir', onError },
      (d) => {
        if (
          d.type !== 'deleted' &&
          d.object.status?.phase === 'Released' &&
          d.object.spec.persistentVolumeReclaimPolicy === 'Delete'
        )
          void this.reclaim(d.object);
      },
    );
    this.claims.start();
    this.volumes.start();
  }

  stop(): void {
    this.claims?.stop();
    this.volumes?.stop();
  }

  private async provision(c: Claim): Promise<void> {
    const pv = volumeFor(c, this.root);
    prepareVolumeDir(pv.spec.hostPath!.path);
    try {
      await this.client.create('/api/v1/persistentvolumes', pv);
      this.log.info(
        { claim: `${c.metadata.namespace}/${c.metadata.name}`, volume: pv.metadata.name },
        'provisioned local-dir volume',
      );
    } catch (err) {
      if (!isApiError(err, 409)) this.log.warn({ err, claim: c.metadata.name }, 'provisioning failed');
    }
  }

  private async reclaim(v: Volume): Promise<void> {
    const path = v.spec.hostPath?.path;
    if (path && path.startsWith(this.root + '/')) rmSync(path, { recursive: true, force: true });
    try {
      await this.client.delete(`/api/v1/persistentvolumes/${v.metadata.name}`);
      this.log.info({ volume: v.metadata.name }, 'reclaimed local-dir volume');
    } catch (err) {
      if (!isApiError(err, 404)) this.log.warn({ err, volume: v.metadata.name }, 'reclaim failed');
    }
  }
}
