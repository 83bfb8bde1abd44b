/**
 * Pod volumes as host directories: emptyDir, hostPath, PVC (the bound PV's local directory,
 * which outlives Pods), configMap, secret, downwardAPI and projected (incl. the bound
 * service-account token, refreshed before it expires). Files are written atomically.
 */
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import type { KubeClient } from '../lib/kube/client.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { fieldValue, type DataSource } from './env.ts';
import type { KeyToPath, Pod, ProjectedSource, Volume } from './pod-types.ts';
import { podFsUser } from './security-context.ts';

export class VolumeError extends Error {
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

export interface VolumeContext {
  pod: Pod;
  podDir: string;
  client: KubeClient;
  data: DataSource;
  clusterCa: string;
  podIP: string;
  hostIP: string;
  now: () => number;
  /** Request fresh service-account tokens (false on a periodic resync before they are due). */
  refreshTokens?: boolean;
}

export interface PreparedVolume {
  name: string;
  hostPath: string;
  readOnly: boolean;
  /** Epoch ms when the contents must be refreshed (service-account tokens), if ever. */
  refreshAt?: number;
}

function safeRelative(p: string): string {
  const n = normalize(p);
  if (n.startsWith('/') || n === '..' || n.startsWith('../'))
    throw new VolumeError('InvalidVolume', `volume item path "${p}" must be relative without ".."`);
  return n;
}

/** Who owns a volume file: uid and gid (root unless the Pod's fsUser/fsGroup say otherwise). */
export interface Owner {
  uid: number;
  gid: number;
}

/**
 * Writes via rename; an unchanged file is left alone so readers watching mtime see no churn
 * (unless its owner or mode must change).
 */
export function writeAtomic(file: string, content: string | Buffer, mode = 0o644, owner?: Owner): void {
  try {
    const st = lstatSync(file);
    const same = !owner || (st.uid === owner.uid && st.gid === owner.gid);
    if (same && (st.mode & 0o7777) === mode && readFileSync(file).equals(Buffer.from(content))) return;
  } catch {
    /* new file */
  }
  mkdirSync(dirname(file), { recursive: true });
  const tmp = `${file}.tmp-${process.pid}`;
  writeFileSync(tmp, content, { mode });
  if (owner) chownSync(tmp, owner.uid, owner.gid);
  chmodSync(tmp, mode);
  renameSync(tmp, file);
}

/**
 * The kubelet's SetVolumeOwnership for a Pod with an fsGroup: files of read-only (data) volumes
 * get the fsGroup and group read; the service-account token is 0600 for the Pod's fsUser (the
 * runAsUser all its containers share), 0640 with an fsGroup, else the volume's mode.
 */
function dataOwner(ctx: VolumeContext, mode: number): { mode: number; owner?: Owner } {
  const fsGroup = ctx.pod.spec.securityContext?.fsGroup;
  if (fsGroup === undefined) return { mode };
  return { mode: mode | 0o440, owner: { uid: 0, gid: fsGroup } };
}

function tokenOwner(ctx: VolumeContext, mode: number): { mode: number; owner?: Owner } {
  const fsGroup = ctx.pod.spec.securityContext?.fsGroup;
  const fsUser = podFsUser(ctx.pod);
  if (fsGroup === undefined && fsUser === undefined) return { mode };
  return { mode: fsGroup === undefined ? 0o600 : 0o640, owner: { uid: fsUser ?? 0, gid: fsGroup ?? 0 } };
}

/**
 * A writable volume's ownership with an fsGroup (kubelet SetVolumeOwnership, policy
 * OnRootMismatch): every file gets the group and group rw, directories the setgid bit so what
 * containers create inherits the group. Without an fsGroup the directory is left as it is.
 */
export function applyFsGroup(dir: string, fsGroup: number | undefined): void {
  if (fsGroup === undefined) return;
  const root = lstatSync(dir);
  if (root.gid === fsGroup && (root.mode & 0o2070) === 0o2070) return;
  const walk = (p: string): void => {
    const st = lstatSync(p);
    if (st.isSymbolicLink()) return;
    chownSync(p, st.uid, fsGroup);
    chmodSync(p, (st.mode & 0o7777) | 0o660 | (st.isDirectory() ? 0o2110 : 0));
    if (st.isDirectory()) for (const e of readdirSync(p)) walk(join(p, e));
  };
  walk(dir);
}

function writeItems(
  ctx: VolumeContext,
  dir: string,
  data: Record<string, string>,
  src: { items: KeyToPath[] | undefined; mode: number; what: string },
): void {
  const { items, mode, what } = src;
  const entries: KeyToPath[] = items ?? Object.keys(data).map((key) => ({ key, path: key }));
  for (const it of entries) {
    if (!(it.key in data)) throw new VolumeError('CreateContainerConfigError', `${what}: key "${it.key}" not found`);
    const own = dataOwner(ctx, it.mode ?? mode);
    writeAtomic(join(dir, safeRelative(it.path)), data[it.key] ?? '', own.mode, own.owner);
  }
}

async function keyedSource(
  ctx: VolumeContext,
  kind: 'secret' | 'configMap',
  name: string,
  optional: boolean | undefined,
): Promise<Record<string, string> | undefined> {
  const ns = ctx.pod.metadata.namespace ?? 'default';
  const data = await (kind === 'secret' ? ctx.data.secret(ns, name) : ctx.data.configMap(ns, name));
  if (data === undefined && !optional)
    throw new VolumeError(
      'CreateContainerConfigError',
      `${kind === 'secret' ? 'secret' : 'configmap'} "${name}" not found`,
    );
  return data;
}

async function saToken(
  ctx: VolumeContext,
  src: NonNullable<ProjectedSource['serviceAccountToken']>,
): Promise<{ token: string; refreshAt: number }> {
  const pod = ctx.pod;
  const sa = pod.spec.serviceAccountName ?? 'default';
  const seconds = Math.max(600, src.expirationSeconds ?? 3600);
  const req = {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: {
      audiences: src.audience ? [src.audience] : null,
      expirationSeconds: seconds,
      boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.metadata.name, uid: pod.metadata.uid },
    },
  };
  const res = await ctx.client.create<KubeObject & { status: { token: string } }>(
    `/api/v1/namespaces/${pod.metadata.namespace}/serviceaccounts/${sa}/token`,
    req,
  );
  return { token: res.status.token, refreshAt: ctx.now() + seconds * 800 };
}

async function writeProjected(
  ctx: VolumeContext,
  dir: string,
  v: NonNullable<Volume['projected']>,
): Promise<number | undefined> {
  let refreshAt: number | undefined;
  const mode = v.defaultMode ?? 0o644;
  for (const s of v.sources) {
    if (s.serviceAccountToken) {
      if (ctx.refreshTokens === false) continue;
      const t = await saToken(ctx, s.serviceAccountToken);
      const own = tokenOwner(ctx, mode);
      writeAtomic(join(dir, safeRelative(s.serviceAccountToken.path)), t.token, own.mode, own.owner);
      refreshAt = Math.min(refreshAt ?? Infinity, t.refreshAt);
    } else if (s.configMap) {
      const data = await keyedSource(ctx, 'configMap', s.configMap.name, s.configMap.optional);
      if (data)
        writeItems(ctx, dir, data, { items: s.configMap.items, mode: mode, what: `configmap ${s.configMap.name}` });
    } else if (s.secret) {
      const data = await keyedSource(ctx, 'secret', s.secret.name, s.secret.optional);
      if (data) writeItems(ctx, dir, data, { items: s.secret.items, mode: mode, what: `secret ${s.secret.name}` });
    } else if (s.downwardAPI) {
      writeDownward(ctx, dir, s.downwardAPI.items);
    }
  }
  return refreshAt;
}

function writeDownward(
  ctx: VolumeContext,
  dir: string,
  items: { path: string; fieldRef?: { fieldPath: string } }[],
): void {
  const own = dataOwner(ctx, 0o644);
  for (const it of items) {
    if (it.fieldRef)
      writeAtomic(
        join(dir, safeRelative(it.path)),
        fieldValue(ctx.pod, it.fieldRef.fieldPath, ctx.podIP, ctx.hostIP),
        own.mode,
        own.owner,
      );
  }
}

async function pvcPath(ctx: VolumeContext, claimName: string): Promise<string> {
  const ns = ctx.pod.metadata.namespace ?? 'default';
  const pvc = await ctx.client.get<KubeObject & { spec: { volumeName?: string }; status?: { phase?: string } }>(
    `/api/v1/namespaces/${ns}/persistentvolumeclaims/${claimName}`,
  );
  if (!pvc.spec.volumeName || pvc.status?.phase !== 'Bound')
    throw new VolumeError('VolumeNotBound', `persistentvolumeclaim "${claimName}" is not bound`);
  const pv = await ctx.client.get<KubeObject & { spec: { hostPath?: { path: string }; local?: { path: string } } }>(
    `/api/v1/persistentvolumes/${pvc.spec.volumeName}`,
  );
  const path = pv.spec.hostPath?.path ?? pv.spec.local?.path;
  if (!path)
    throw new VolumeError(
      'VolumeNotSupported',
      `persistentvolume "${pvc.spec.volumeName}" is neither hostPath nor local`,
    );
  // A new local volume is world-writable, as local-dir provisioners create them; the Pod's
  // fsGroup then owns it like a kubelet's local volume.
  if (!existsSync(path)) {
    mkdirSync(path, { recursive: true });
    chmodSync(path, 0o777);
  }
  applyFsGroup(path, ctx.pod.spec.securityContext?.fsGroup);
  return path;
}

/** Creates or refreshes one volume's directory. */
export async function prepareVolume(ctx: VolumeContext, v: Volume): Promise<PreparedVolume> {
  const dir = join(ctx.podDir, 'volumes', v.name);
  const base = { name: v.name, hostPath: dir, readOnly: false };
  if (v.hostPath) {
    if (v.hostPath.type === 'DirectoryOrCreate' || !v.hostPath.type) mkdirSync(v.hostPath.path, { recursive: true });
    else if (!existsSync(v.hostPath.path))
      throw new VolumeError('HostPathMissing', `hostPath ${v.hostPath.path} does not exist`);
    return { ...base, hostPath: v.hostPath.path };
  }
  if (v.persistentVolumeClaim)
    return {
      ...base,
      hostPath: await pvcPath(ctx, v.persistentVolumeClaim.claimName),
      readOnly: !!v.persistentVolumeClaim.readOnly,
    };
  mkdirSync(dir, { recursive: true });
  if (v.emptyDir) {
    // kubelet: an emptyDir is 0777, with the Pod's fsGroup and setgid when it has one.
    chmodSync(dir, 0o777);
    applyFsGroup(dir, ctx.pod.spec.securityContext?.fsGroup);
    return base;
  }
  return prepareDataVolume(ctx, v, base);
}

async function prepareDataVolume(ctx: VolumeContext, v: Volume, base: PreparedVolume): Promise<PreparedVolume> {
  const dir = base.hostPath;
  if (v.configMap) {
    const data = await keyedSource(ctx, 'configMap', v.configMap.name, v.configMap.optional);
    if (data)
      writeItems(ctx, dir, data, {
        items: v.configMap.items,
        mode: v.configMap.defaultMode ?? 0o644,
        what: `configmap ${v.configMap.name}`,
      });
    return { ...base, readOnly: true };
  }
  if (v.secret) {
    const data = await keyedSource(ctx, 'secret', v.secret.secretName, v.secret.optional);
    if (data)
      writeItems(ctx, dir, data, {
        items: v.secret.items,
        mode: v.secret.defaultMode ?? 0o644,
        what: `secret ${v.secret.secretName}`,
      });
    return { ...base, readOnly: true };
  }
  if (v.downwardAPI) {
    writeDownward(ctx, dir, v.downwardAPI.items);
    return { ...base, readOnly: true };
  }
  if (v.projected) {
    const refreshAt = await writeProjected(ctx, dir, v.projected);
    return { ...base, readOnly: true, ...(refreshAt !== undefined ? { refreshAt } : {}) };
  }
  throw new VolumeError(
    'VolumeNotSupported',
    `volume "${v.name}": this node agent supports emptyDir, hostPath, persistentVolumeClaim, configMap, secret, downwardAPI and projected`,
  );
}

/**
 * Removes a Pod's directory. A process that outlived its container (a straggling log write) can
 * add a file while the tree is removed, so ENOTEMPTY/EBUSY are retried as rm -rf would be.
 */
export function removePodDir(podDir: string): void {
  rmSync(podDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 });
}
