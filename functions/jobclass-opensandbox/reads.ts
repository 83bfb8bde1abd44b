/**
 * The Secrets one invocation of the OpenSandbox adapter reads, by name, with live GETs
 * (WatchTrigger.fetch): the API key Secret of the parameters in use, and while a sandbox is still
 * to be created the Job's env and image pull Secrets and env ConfigMaps. The adapter never lists or watches Secrets
 * (docs/adr/0009-secrets-read-by-name.md), and a rotated key is used from the next call on.
 */
import { R } from '../../lib/fn/resources.ts';
import type { ObjectRef, State } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { X, type Job, type OpenSandboxParameters } from '../../lib/jobclass/api.ts';
import { jobValueRefs } from '../../lib/jobclass/envrefs.ts';
import { isAccepted, isFinished } from '../../lib/jobclass/jobs.ts';
import { mayHaveExecution } from './connection.ts';
import { isOpenSandboxJob } from './core.ts';

export function apiKeyRef(p: OpenSandboxParameters): ObjectRef {
  return { resource: R.secrets, namespace: p.spec.apiKeySecretRef.namespace, name: p.spec.apiKeySecretRef.name };
}

function paramsNamed(state: State, name: string): OpenSandboxParameters | undefined {
  return state.get(X.openSandboxParameters, undefined, name) as OpenSandboxParameters | undefined;
}

/** Jobs of OpenSandbox classes waiting to be scheduled (woken when their class changes). */
export function waitingJobs(state: State, className: string): Job[] {
  return (state.list(X.jobs) as Job[]).filter(
    (j) =>
      isOpenSandboxJob(j) &&
      isAccepted(j.status) &&
      !isFinished(j.status) &&
      !j.status?.execution?.sandboxID &&
      j.status?.resolvedJobClass?.name === className,
  );
}

function forJob(job: Job | undefined, state: State): ObjectRef[] {
  if (!job || !isOpenSandboxJob(job) || !isAccepted(job.status) || isFinished(job.status)) return [];
  const params = paramsNamed(state, job.status!.resolvedJobClass!.parametersRef.name);
  const refs = params ? [apiKeyRef(params)] : [];
  // The Secret recorded with the execution's backend (used when the parameters moved elsewhere).
  const recorded = job.status?.execution?.apiKeySecretRef;
  if (
    recorded &&
    mayHaveExecution(job) &&
    !refs.some((r) => r.namespace === recorded.namespace && r.name === recorded.name)
  )
    refs.push({ resource: R.secrets, namespace: recorded.namespace, name: recorded.name });
  if (!job.status?.execution?.sandboxID && !job.metadata.deletionTimestamp) refs.push(...jobValueRefs(job));
  return refs;
}

/** WatchTrigger.fetch refs for a Job key or @params:<name>. */
export function secretRefs({
  key,
  object,
  state,
}: {
  key: string;
  object: KubeObject | undefined;
  state: State;
}): ObjectRef[] {
  if (key.startsWith('@params:')) {
    const p = paramsNamed(state, key.slice(8));
    return p ? [apiKeyRef(p)] : [];
  }
  return forJob(object as Job | undefined, state);
}
