/**
 * Who may read a Project's repository on the Git Server, and where a sync may fetch from
 * (ADR 0026), pure. A caller presents a Kubernetes token for the Git audience; the server has it
 * reviewed (TokenReview) and then authorises the identity for one Project: a Node may read only
 * the repository of the Project whose Workspace's live sandbox is its own Pod; anyone else needs
 * `get` on `projects/repository` of that Project (SubjectAccessReview). A sync fetches only the
 * Project's own repository, and never from loopback, link-local, private or otherwise internal
 * addresses unless the server's allow-list names them.
 */
import { createHash } from 'node:crypto';
import type { Workspace } from './api.ts';
import { NODE_SA, SANDBOX_SA_PREFIX } from './node-report.ts';

/** The audience of the token a Node presents to the Git Server (its projected token, file GIT_TOKEN_FILE). */
export const GIT_AUDIENCE = 'git.dev.kruntimes.io';
/** The file of the Git-audience token beside the Node's API token in its projected volume. */
export const GIT_TOKEN_FILE = 'git-token';
/** SubjectAccessReview of a non-Node caller: verb get on projects/repository (group dev.kruntimes.io). */
export const REPOSITORY_SUBRESOURCE = 'repository';

/** A refusal of the Git Server with its HTTP code and stable reason. */
export class GitAccessError extends Error {
  constructor(
    readonly reason: string,
    readonly code: number,
    message: string,
  ) {
    super(`${reason}: ${message}`);
    this.name = 'GitAccessError';
  }
}

/** The authenticated user of a TokenReview. */
export interface Identity {
  username: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
}

/** The bearer token of an Authorization header, or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  const m = /^Bearer ([A-Za-z0-9._~+/=-]+)$/.exec(header ?? '');
  return m?.[1];
}

/** Cache keys never hold the token itself. */
export const tokenDigest = (token: string): string => createHash('sha256').update(token).digest('hex');

/**
 * A Node's identity: the ServiceAccount kruntimes-devws-node with a Pod-bound token (its
 * pod-name), or an OpenSandbox sandbox's Node, the ServiceAccount named by its sandbox instance
 * ID (`ws-sbx-…`, docs/workspaces-dev.md "Substrates"): `pod` is then that instance ID.
 */
export function nodeOf(id: Identity): { namespace: string; pod: string } | undefined {
  const m = /^system:serviceaccount:([^:]+):([^:]+)$/.exec(id.username);
  if (m?.[1] && m[2]?.startsWith(SANDBOX_SA_PREFIX)) return { namespace: m[1], pod: m[2] };
  const pods = id.extra?.['authentication.kubernetes.io/pod-name'] ?? [];
  if (!m || m[2] !== NODE_SA || pods.length !== 1 || !pods[0] || !m[1]) return undefined;
  return { namespace: m[1], pod: pods[0] };
}

/**
 * A Node may read the repository of a Project one of whose Workspaces has the Node's own Pod as
 * its live sandbox (same namespace, not terminated, the Workspace not deleted); nothing else.
 */
export function authorizeNode(
  node: { namespace: string; pod: string },
  namespace: string,
  project: string,
  workspaces: Workspace[],
): void {
  const own = (w: Workspace): boolean =>
    w.spec.project === project &&
    w.status?.sandbox?.id === node.pod &&
    !w.status.sandbox.terminated &&
    w.status.observedState !== 'deleted';
  if (node.namespace !== namespace || !workspaces.some(own))
    throw new GitAccessError(
      'repository_forbidden',
      403,
      `the Node of sandbox ${node.namespace}/${node.pod} is not the live sandbox of a Workspace of ${namespace}/${project}`,
    );
}

/** Answers kept for a short time, keyed by token digest (never the token); bounded. */
export class ReviewCache<T> {
  private readonly entries = new Map<string, { value: T; until: number }>();
  constructor(
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
    private readonly limit = 10_000,
  ) {}

  get(key: string): T | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (e.until > this.now()) return e.value;
    this.entries.delete(key);
    return undefined;
  }

  set(key: string, value: T): void {
    if (this.entries.size >= this.limit) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.set(key, { value, until: this.now() + this.ttlMs });
  }
}
