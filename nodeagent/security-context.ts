/**
 * The kubelet's runAsNonRoot check (pkg/kubelet/kuberuntime verifyRunAsNonRoot): a container
 * whose effective securityContext sets runAsNonRoot must run as a non-root uid, taken from
 * runAsUser (container, else Pod) or else from the image's declared USER. An image that declares
 * no user runs as root; a non-numeric user cannot be verified. A refusal leaves the container
 * waiting with reason CreateContainerConfigError, exactly as on a kubelet.
 */
import type { Container, Pod } from './pod-types.ts';

export interface SecurityContext {
  runAsNonRoot?: boolean;
  runAsUser?: number;
}

/** The uid part of an image USER ("65532", "65532:65532", "app"); undefined when none is declared. */
function imageUid(user: string | undefined): { uid?: number; name: string } | undefined {
  const name = (user ?? '').split(':')[0] ?? '';
  if (!name) return undefined;
  return /^\d+$/.test(name) ? { uid: Number(name), name } : { name };
}

/** Why the container may not start under runAsNonRoot, or undefined when it may. */
export function verifyRunAsNonRoot(pod: Pod, c: Container, imageUser: string | undefined): string | undefined {
  const podSc = (pod.spec.securityContext ?? {}) as SecurityContext;
  const sc = (c.securityContext ?? {}) as SecurityContext;
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
