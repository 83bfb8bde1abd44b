/**
 * The Git Server's questions to the Kubernetes API (ADR 0026): who a token is (TokenReview for
 * the Git audience), whether a non-Node identity may read a Project's repository
 * (SubjectAccessReview: get projects/repository), a namespace's Workspaces (which Pod is whose
 * live sandbox), a Project (the repository a sync fetches) and its credentialRef Secret (where
 * the namespace granted it). Every call either answers or
 * throws: the caller refuses (fails closed) when the API server cannot answer.
 */
import type { Project, Workspace } from '../lib/devws/api.ts';
import { GROUP } from '../lib/devws/api.ts';
import { GIT_AUDIENCE, REPOSITORY_SUBRESOURCE, type Identity } from '../lib/devws/git-access.ts';
import type { KubeClient } from '../lib/kube/client.ts';
import { isApiError } from '../lib/kube/errors.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import type { CredentialSecret, SecretRead } from '../lib/devws/credential.ts';

export interface GitAuthority {
  /** The identity of a token issued for the Git audience; undefined when it is not authenticated. */
  review(token: string): Promise<Identity | undefined>;
  /** Whether the identity may `get` `projects/repository` of the Project. */
  mayRead(id: Identity, namespace: string, project: string): Promise<boolean>;
  workspaces(namespace: string): Promise<Workspace[]>;
  project(namespace: string, name: string): Promise<Project | undefined>;
  /** A Project's credentialRef Secret, as far as the namespace granted the Git Server `get` on it. */
  secret(namespace: string, name: string): Promise<SecretRead>;
}

interface TokenReviewStatus {
  authenticated?: boolean;
  audiences?: string[];
  user?: Identity;
}

/** A Secret as the Git Server may read it: RBAC's 403 (not granted) and 404 are answers, anything else throws. */
async function readSecret(client: KubeClient, namespace: string, name: string): Promise<SecretRead> {
  try {
    return {
      secret: await client.get<KubeObject & CredentialSecret>(`/api/v1/namespaces/${namespace}/secrets/${name}`),
    };
  } catch (err) {
    if (isApiError(err, 404)) return { missing: 'not_found' };
    if (isApiError(err, 403)) return { missing: 'forbidden' };
    throw err;
  }
}

export function kubeGitAuthority(client: KubeClient): GitAuthority {
  const dev = `/apis/${GROUP}/v1alpha1/namespaces`;
  return {
    async review(token) {
      const tr = await client.create<KubeObject & { status?: TokenReviewStatus }>(
        '/apis/authentication.k8s.io/v1/tokenreviews',
        {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenReview',
          spec: { token, audiences: [GIT_AUDIENCE] },
        },
      );
      const st = tr.status ?? {};
      if (!st.authenticated || !st.user?.username || !(st.audiences ?? []).includes(GIT_AUDIENCE)) return undefined;
      return st.user;
    },
    async mayRead(id, namespace, project) {
      const sar = await client.create<KubeObject & { status?: { allowed?: boolean } }>(
        '/apis/authorization.k8s.io/v1/subjectaccessreviews',
        {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SubjectAccessReview',
          spec: {
            user: id.username,
            ...(id.uid ? { uid: id.uid } : {}),
            groups: id.groups ?? [],
            ...(id.extra ? { extra: id.extra } : {}),
            resourceAttributes: {
              namespace,
              verb: 'get',
              group: GROUP,
              resource: 'projects',
              subresource: REPOSITORY_SUBRESOURCE,
              name: project,
            },
          },
        },
      );
      return sar.status?.allowed === true;
    },
    async workspaces(namespace) {
      return (await client.list<Workspace>(`${dev}/${namespace}/workspaces`)).items;
    },
    secret: (namespace, name) => readSecret(client, namespace, name),
    async project(namespace, name) {
      try {
        return await client.get<Project>(`${dev}/${namespace}/projects/${name}`);
      } catch (err) {
        if (isApiError(err, 404)) return undefined;
        throw err;
      }
    },
  };
}
