/**
 * The I/O half of the OpenSandbox adapter, kept apart from the pure core: it runs the single
 * backend action the core asks for with an injected SandboxApi and feeds the result back.
 *
 * One invocation for a Job: decide (no I/O) -> list the Job's sandboxes by its UID tag ->
 * decide again with that observation -> at most one create or delete -> afterAction. The list
 * always precedes a create in the same invocation. Nothing here writes to Kubernetes: the host
 * applies the returned operations as for any function.
 */
import type { Operation, ReconcileInput, State } from '../../lib/fn/types.ts';
import { OpenSandboxClient, type SandboxApi } from '../../lib/opensandbox/client.ts';
import type { EndpointPolicy } from '../../lib/opensandbox/endpoint.ts';
import { OpenSandboxError } from '../../lib/opensandbox/errors.ts';
import { sharedTransport } from '../../lib/opensandbox/transport.ts';
import type { Sandbox } from '../../lib/opensandbox/types.ts';
import { JOB_UID_LABEL, X, type Job, type JobClass, type OpenSandboxParameters } from '../../lib/jobclass/api.ts';
import { endpointPolicy } from '../../lib/jobclass/config.ts';
import { protectParameters } from '../../lib/jobclass/finalizers.ts';
import { connectionOf, type Connection } from './connection.ts';
import {
  decide,
  type Action,
  type ActionResult,
  type BackendFailure,
  type Observation,
  type SandboxView,
} from './core.ts';
import { afterAction } from './outcome.ts';
import { probeOps } from './probe.ts';
import { COMPONENT } from './status.ts';

export interface Deps {
  /** A client for one endpoint + API key. */
  api(c: Connection): SandboxApi;
  policy(): EndpointPolicy;
}

export function failureOf(err: unknown): BackendFailure {
  if (err instanceof OpenSandboxError)
    return {
      kind: err.kind,
      message: err.message,
      ...(err.retryAfterMs !== undefined ? { retryAfterMs: err.retryAfterMs } : {}),
      outcomeUnknown: err.outcomeUnknown,
    };
  return { kind: 'network', message: err instanceof Error ? err.message : String(err), outcomeUnknown: true };
}

const view = (s: Sandbox): SandboxView => ({
  id: s.id,
  state: s.status.state,
  ...(s.status.reason ? { reason: s.status.reason } : {}),
  ...(s.status.message ? { message: s.status.message } : {}),
  createdAt: s.createdAt,
});

/** The Job's sandboxes: listed by the UID tag and re-checked locally (a server ignoring the filter cannot cause an adoption). */
export async function observe(api: SandboxApi, uid: string): Promise<Observation> {
  try {
    const items = await api.listAll({ metadata: { [JOB_UID_LABEL]: uid } });
    return { kind: 'listed', sandboxes: items.filter((s) => s.metadata?.[JOB_UID_LABEL] === uid).map(view) };
  } catch (err) {
    return { kind: 'failed', error: failureOf(err) };
  }
}

export async function perform(api: SandboxApi, action: Exclude<Action, { type: 'observe' }>): Promise<ActionResult> {
  try {
    if (action.type === 'create') {
      const res = await api.create(action.request);
      return { ok: true, created: { id: res.id, state: res.status.state, createdAt: res.createdAt } };
    }
    for (const id of action.ids) await api.delete(id);
    return { ok: true };
  } catch (err) {
    return { ok: false, error: failureOf(err) };
  }
}

/** One Job: observe, decide, act at most once, and return the operations for the host. */
export async function runJob(job: Job | undefined, state: State, now: Date, deps: Deps): Promise<Operation[]> {
  const policy = deps.policy();
  const first = decide({ job, state, now, policy });
  if (first.action?.type !== 'observe') return first.ops;
  const api = deps.api(first.action.connection);
  const observation = await observe(api, job!.metadata.uid ?? '');
  const d = decide({ job, state, now, policy, observation });
  if (!d.action || d.action.type === 'observe') return d.ops;
  const result = await perform(api, d.action);
  return [...d.ops, ...afterAction(job!, d.action, result, now)];
}

/** Probe one parameters object and protect it while classes reference it. */
export async function runParameters(name: string, state: State, now: Date, deps: Deps): Promise<Operation[]> {
  const params = state.get(X.openSandboxParameters, undefined, name) as OpenSandboxParameters | undefined;
  if (!params) return [];
  const protect = protectParameters(
    X.openSandboxParameters,
    params,
    state.list(X.jobClasses) as JobClass[],
    now,
    COMPONENT,
  );
  if (params.metadata.deletionTimestamp) return protect;
  const conn = connectionOf(params, state, deps.policy());
  if ('problem' in conn) return [...protect, ...probeOps(params, { ok: false, problem: conn.problem }, undefined, now)];
  try {
    const api = deps.api(conn);
    const health = await api.health();
    if (health.healthy === false)
      return [
        ...protect,
        ...probeOps(
          params,
          {
            ok: false,
            problem: { reason: 'BackendUnhealthy', message: `the server reports itself unhealthy (${health.message})` },
          },
          conn.secretResourceVersion,
          now,
        ),
      ];
    await api.list({ metadata: { [JOB_UID_LABEL]: 'probe' } }, 1, 1);
    return [...protect, ...probeOps(params, { ok: true }, conn.secretResourceVersion, now)];
  } catch (err) {
    return [...protect, ...probeOps(params, { ok: false, error: failureOf(err) }, conn.secretResourceVersion, now)];
  }
}

/** The handler: Job keys and @params:<name>. Only a Job's own key acts for it (a class change wakes
 * the Jobs it unblocks under their keys), so two invocations never create for one Job at once. */
export async function reconcileWithEffects(
  { key, object, state, now }: ReconcileInput,
  deps: Deps,
): Promise<Operation[]> {
  if (key.startsWith('@params:')) return runParameters(key.slice(8), state, now, deps);
  return runJob(object as Job | undefined, state, now, deps);
}

/** Production dependencies: the typed client over fetch, or node:https with KRT_OPENSANDBOX_CA_FILE. */
export function defaultDeps(env: NodeJS.ProcessEnv = process.env): Deps {
  return {
    policy: () => endpointPolicy(env),
    api: (c) => {
      const transport = sharedTransport(env.KRT_OPENSANDBOX_CA_FILE);
      return new OpenSandboxClient({ endpoint: c.endpoint, apiKey: c.apiKey, policy: endpointPolicy(env), transport });
    },
  };
}
