/**
 * Sessions run commands, so they need `create` on runs/session (as `pods/exec` does): the API
 * server authorises the WebSocket GET with `get`, and this backend then asks the API server, with
 * a SubjectAccessReview for the proxied user (name, uid, groups, extra), whether that user may
 * `create` runs/session on this Run. Any failure to get an answer refuses the operation.
 */
import type { KubeClient } from '../../lib/kube/client.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import type { UserInfo } from '../aggregation/requestheader.ts';

export const SESSION_VERB = 'create';

export function sessionAccessReview(who: UserInfo, ns: string, name: string): object {
  return {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SubjectAccessReview',
    spec: {
      user: who.username,
      ...(who.uid ? { uid: who.uid } : {}),
      groups: who.groups,
      extra: who.extra,
      resourceAttributes: {
        namespace: ns,
        verb: SESSION_VERB,
        group: 'sessions.kruntimes.io',
        resource: 'runs',
        subresource: 'session',
        name,
      },
    },
  };
}

/** The Kubernetes-style message of a refused session, or undefined when the user may open it. */
export function forbiddenMessage(
  who: UserInfo,
  ns: string,
  name: string,
  status: { allowed?: boolean; denied?: boolean; reason?: string } | undefined,
): string | undefined {
  if (status?.allowed === true && status.denied !== true) return undefined;
  return (
    `runs.sessions.kruntimes.io "${name}" is forbidden: User "${who.username}" cannot ${SESSION_VERB} resource ` +
    `"runs/session" in API group "sessions.kruntimes.io" in the namespace "${ns}"` +
    (status?.reason ? `: ${status.reason}` : '')
  );
}

/** Asks the API server; resolves to a refusal message, undefined when allowed; rejects when no answer came. */
export async function checkSessionAccess(
  client: KubeClient,
  who: UserInfo,
  ns: string,
  name: string,
): Promise<string | undefined> {
  const res = await client.create<KubeObject & { status?: { allowed?: boolean; denied?: boolean; reason?: string } }>(
    '/apis/authorization.k8s.io/v1/subjectaccessreviews',
    sessionAccessReview(who, ns, name),
  );
  return forbiddenMessage(who, ns, name, res.status);
}
