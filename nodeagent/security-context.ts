/**
 * The kubelet's runAsNonRoot check (pkg/kubelet/kuberuntime verifyRunAsNonRoot): a container
 * whose effective securityContext sets runAsNonRoot must run as a non-root uid, taken from
 * runAsUser (container, else Pod) or else from the image's declared USER. An image that declares
 * no user runs as root; a non-numeric user cannot be verified. A refusal leaves the container
 * waiting with reason CreateContainerConfigError, exactly as on a kubelet.
 */
import type { Container, Pod } from './pod-types.ts';

/** The uid part of an image USER ("65532", "65532:65532", "app"); undefined when none is declared. */
function imageUid(user: string | undefined): { uid?: number; name: string } | undefined {
  const name = (user ?? '').split(':')[0] ?? '';
  if (!name) return undefined;
  return /^\d+$/.test(name) ? { uid: Number(name), name } : { name };
}

/** Why the container may not start under runAsNonRoot, or undefined when it may. */
export function verifyRunAsNonRoot(pod: Pod, c: Container, imageUser: string | undefined): string | undefined {
  const podSc = pod.spec.securityContext ?? {};
  const sc = c.securityContext ?? {};
  const nonRoot = sc.runAsNonRoot ?? podSc.runAsNonRoot;
  if (nonRoot !== true) return undefined;
  const where = `pod: "${pod.metadata.name}_${pod.metadata.namespace}(${pod.metadata.uid})", container: ${c.name}`;
  const runAsUser = sc.runAsUser ?? podSc.runAsUser;
  if (runAsUser !== undefined)
    return runAsUser === 0 ? `container's runAsUser breaks non-root policy (${where})` : undefined;
  const img = imageUid(imageUser);
  if (!img || img.uid === 0) return `container has runAsNonRoot and image will run as root (${where})`;
  if (img.uid === undefined)
    return `container has runAsNonRoot and image has non-numeric user (${img.name}), cannot verify user is non-root (${where})`;
  return undefined;
}

/** The credentials a container's processes run with (as a CRI runtime sets them up). */
export interface Identity {
  uid: number;
  gid: number;
  /** Supplementary groups: the Pod's fsGroup and supplementalGroups. */
  groups: number[];
  /** no_new_privs (allowPrivilegeEscalation: false). */
  noNewPrivs: boolean;
}

/**
 * The uid/gid the kubelet and its runtime give a container: runAsUser/runAsGroup (container,
 * else Pod), else the image's USER ("uid[:gid]"; a runAsUser without a group takes the image's
 * gid when it names the same uid, else 0), else root. Supplementary groups are the Pod's fsGroup
 * and supplementalGroups. A non-numeric image user cannot be resolved without the image's
 * /etc/passwd: that is an error (CreateContainerError) rather than a silent root.
 */
export function containerIdentity(pod: Pod, c: Container, imageUser: string | undefined): Identity | string {
  const podSc = pod.spec.securityContext ?? {};
  const sc = c.securityContext ?? {};
  const [imgUser = '', imgGroup = ''] = (imageUser ?? '').split(':');
  const num = (s: string): number | undefined => (/^\d+$/.test(s) ? Number(s) : undefined);
  const runAsUser = sc.runAsUser ?? podSc.runAsUser;
  if (runAsUser === undefined && imgUser !== '' && num(imgUser) === undefined)
    return `image user "${imageUser}" is not numeric: the node agent cannot resolve it (set runAsUser)`;
  const uid = runAsUser ?? num(imgUser) ?? 0;
  const imageGid = runAsUser === undefined || runAsUser === num(imgUser) ? num(imgGroup) : undefined;
  const gid = sc.runAsGroup ?? podSc.runAsGroup ?? imageGid ?? 0;
  const groups = [...(podSc.fsGroup !== undefined ? [podSc.fsGroup] : []), ...(podSc.supplementalGroups ?? [])];
  return {
    uid,
    gid,
    groups: [...new Set(groups)].filter((g) => g !== gid),
    noNewPrivs: sc.allowPrivilegeEscalation === false,
  };
}

/**
 * The kubelet's FsUser for projected service-account tokens: the runAsUser every container of
 * the Pod shares (init containers included), else undefined.
 */
export function podFsUser(pod: Pod): number | undefined {
  const podUser = pod.spec.securityContext?.runAsUser;
  const users = [...(pod.spec.initContainers ?? []), ...pod.spec.containers].map(
    (c) => c.securityContext?.runAsUser ?? podUser,
  );
  const first = users[0];
  return first !== undefined && users.every((u) => u === first) ? first : undefined;
}

/**
 * The setpriv arguments that switch to `id` (empty for root: the container keeps root). The kernel
 * clears a process's parent-death signal when its uid or gid changes (prctl(2)), so the switch
 * sets it again (setpriv applies it after the switch): the container still dies with the node
 * agent (container.ts, ADR 0025).
 */
export function setprivArgs(id: Identity): string[] {
  if (id.uid === 0 && id.gid === 0 && id.groups.length === 0 && !id.noNewPrivs) return [];
  return [
    'setpriv',
    `--reuid=${id.uid}`,
    `--regid=${id.gid}`,
    ...(id.groups.length ? [`--groups=${id.groups.join(',')}`] : ['--clear-groups']),
    ...(id.noNewPrivs ? ['--no-new-privs'] : []),
    '--pdeathsig',
    'KILL',
    '--',
  ];
}
