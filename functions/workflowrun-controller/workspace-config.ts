/**
 * The spec of the job-local PersistentWorkspaces the Workflow controller creates. Seed 000: the
 * Workflow spec exposes no workspace controls; the controller's configuration decides. Read once
 * from the extension server's environment:
 *
 * - KRT_JOB_WORKSPACE_TTL_SECONDS: ttlSecondsAfterUnused (default 3600); `none` leaves it unset,
 *   so job workspaces are never deleted automatically (they still go with their WorkflowRun).
 * - KRT_JOB_WORKSPACE_CLEANUP_POLICY: `DeleteAfterTTL` (default) or `Retain`.
 *
 * A bad value stops the function from loading with a message naming the variable (fail closed).
 */

export interface JobWorkspaceSpec {
  mode: 'RuntimePodLocal';
  cleanupPolicy: 'DeleteAfterTTL' | 'Retain';
  ttlSecondsAfterUnused?: number;
}

export const DEFAULT_JOB_WORKSPACE: Readonly<JobWorkspaceSpec> = Object.freeze({
  mode: 'RuntimePodLocal',
  cleanupPolicy: 'DeleteAfterTTL',
  ttlSecondsAfterUnused: 3600,
});

const MAX_INT32 = 2 ** 31 - 1;

export function jobWorkspaceSpec(env: Readonly<Record<string, string | undefined>>): JobWorkspaceSpec {
  const policy = env.KRT_JOB_WORKSPACE_CLEANUP_POLICY ?? DEFAULT_JOB_WORKSPACE.cleanupPolicy;
  if (policy !== 'DeleteAfterTTL' && policy !== 'Retain')
    throw new Error(`KRT_JOB_WORKSPACE_CLEANUP_POLICY: ${JSON.stringify(policy)} is not DeleteAfterTTL or Retain`);
  const raw = env.KRT_JOB_WORKSPACE_TTL_SECONDS;
  if (raw === 'none') return { mode: 'RuntimePodLocal', cleanupPolicy: policy };
  const ttl = raw === undefined || raw === '' ? 3600 : Number(raw);
  if (!Number.isInteger(ttl) || ttl < 0 || ttl > MAX_INT32)
    throw new Error(
      `KRT_JOB_WORKSPACE_TTL_SECONDS: ${JSON.stringify(raw)} is not a whole number of seconds from 0 to ${MAX_INT32}, or "none"`,
    );
  return { mode: 'RuntimePodLocal', cleanupPolicy: policy, ttlSecondsAfterUnused: ttl };
}
