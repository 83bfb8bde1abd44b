/**
 * SubjectAccessReview for an admission request's user (name, uid, groups, extra): may the
 * requester do this themselves? Admission functions use it so that what a controller later does
 * on an object's behalf (read a Secret it names, use a workspace) never exceeds what its creator
 * may do. Errors propagate: callers deny (fail closed).
 */
import type { AdmissionContext, AdmissionRequest } from './types.ts';

export interface ResourceAttributes {
  namespace?: string;
  verb: string;
  group: string;
  resource: string;
  subresource?: string;
  name?: string;
}

interface Review {
  status?: { allowed?: boolean; denied?: boolean; reason?: string; evaluationError?: string };
}

export async function userMay(
  ctx: AdmissionContext,
  user: AdmissionRequest['userInfo'],
  resourceAttributes: ResourceAttributes,
): Promise<boolean> {
  const res = await ctx.post<Review>('/apis/authorization.k8s.io/v1/subjectaccessreviews', {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SubjectAccessReview',
    spec: {
      user: user.username,
      ...(user.uid ? { uid: user.uid } : {}),
      groups: user.groups ?? [],
      extra: user.extra ?? {},
      resourceAttributes,
    },
  });
  return res.status?.allowed === true;
}
