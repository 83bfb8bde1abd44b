/**
 * Pure JobClass status: Accepted (the configuration is one of ours and valid) and Ready (the
 * backend can take new executions), plus the protection finalizer that holds a deletion until
 * no non-terminal Job references the class UID.
 */
import { R } from '../../lib/fn/resources.ts';
import type { Operation, State, StateGauge } from '../../lib/fn/types.ts';
import { checkEndpoint, type EndpointPolicy } from '../../lib/opensandbox/endpoint.ts';
import { validateSelector } from '../../lib/kube/selector.ts';
import {
  API_VERSION,
  CLASS_FINALIZER,
  KUBERNETES_CONTROLLER,
  OPENSANDBOX_CONTROLLER,
  X,
  dataOf,
  type Job,
  type JobClass,
  type KubernetesParameters,
  type OpenSandboxParameters,
  type Parameters,
} from '../../lib/jobclass/api.ts';
import {
  CONTROLLERS,
  isSupportedController,
  parametersOf,
  parametersRefProblem,
} from '../../lib/jobclass/controllers.ts';
import {
  conditionEvents,
  conditionOf,
  eventOp,
  involvedOf,
  isTrue,
  sameJson,
  withConditions,
  type ConditionInput,
} from '../../lib/jobclass/events.ts';
import { addFinalizer, removeFinalizer } from '../../lib/jobclass/finalizers.ts';
import { isFinished } from '../../lib/jobclass/jobs.ts';
import { isDefaultClass } from '../../lib/jobclass/resolve.ts';
import { policyProblem } from '../../lib/jobclass/resources.ts';

export const COMPONENT = 'jobclass-controller';
/** A probe older than this no longer proves the backend reachable. */
export const PROBE_STALE_MS = 5 * 60_000;

export interface ClassContext {
  state: State;
  now: Date;
  endpointPolicy: EndpointPolicy;
}

const accepted = (): ConditionInput => ({
  type: 'Accepted',
  status: 'True',
  reason: 'Accepted',
  message: 'the controller, parameters and resource policy are valid',
});
const rejected = (reason: string, message: string): ConditionInput => ({
  type: 'Accepted',
  status: 'False',
  reason,
  message,
});

function parametersProblem(cls: JobClass, params: Parameters, policy: EndpointPolicy): ConditionInput | undefined {
  if (cls.spec.controllerName !== OPENSANDBOX_CONTROLLER) return undefined;
  const check = checkEndpoint((params as OpenSandboxParameters).spec.endpoint, policy);
  return check.ok
    ? undefined
    : rejected(
        'InvalidParameters',
        `${params.kind ?? 'OpenSandboxExecutionParameters'} ${params.metadata.name ?? ''}: ${check.message}`,
      );
}

/** The Accepted condition of a class. */
export function acceptance(cls: JobClass, ctx: ClassContext): ConditionInput {
  const { controllerName, parametersRef: ref } = cls.spec;
  if (!isSupportedController(controllerName))
    return rejected(
      'UnsupportedController',
      `controllerName ${controllerName} is not one of ${Object.keys(CONTROLLERS).join(', ')}`,
    );
  const refProblem = parametersRefProblem(controllerName, ref);
  if (refProblem) return rejected('InvalidParametersReference', refProblem);
  const params = parametersOf(cls, ctx.state);
  if (!params) return rejected('ParametersNotFound', `${ref.kind} ${ref.name} does not exist`);
  const paramsProblem = parametersProblem(cls, params, ctx.endpointPolicy);
  if (paramsProblem) return paramsProblem;
  const policy = policyProblem(cls.spec.resources);
  if (policy) return rejected('InvalidResourcePolicy', policy);
  if (cls.spec.allowedNamespaces) {
    const sel = validateSelector(cls.spec.allowedNamespaces);
    if (sel) return rejected('InvalidAllowedNamespaces', `spec.allowedNamespaces: ${sel}`);
  }
  return accepted();
}

const ready = (message: string): ConditionInput => ({
  type: 'Ready',
  status: 'True',
  reason: 'BackendReachable',
  message,
});
const notReady = (reason: string, message: string): ConditionInput => ({
  type: 'Ready',
  status: 'False',
  reason,
  message,
});

function kubernetesReadiness(p: KubernetesParameters, state: State): ConditionInput {
  const rc = p.spec.runtimeClassName;
  if (rc && !state.get(X.runtimeClasses, undefined, rc))
    return notReady('RuntimeClassNotFound', `RuntimeClass ${rc} does not exist`);
  return ready(rc ? `RuntimeClass ${rc} exists` : 'the cluster default runtime is used');
}

/** Readiness of an OpenSandbox class from its API key Secret and the adapter's last probe; `recheckAt` when it goes stale. */
export function openSandboxReadiness(
  p: OpenSandboxParameters,
  ctx: ClassContext,
): { condition: ConditionInput; recheckAt?: number } {
  const ref = p.spec.apiKeySecretRef;
  const secret = ctx.state.get(R.secrets, ref.namespace, ref.name);
  if (!secret)
    return { condition: notReady('ApiKeySecretNotFound', `Secret ${ref.namespace}/${ref.name} does not exist`) };
  const value = dataOf(secret)[ref.key];
  if (!value)
    return {
      condition: notReady('ApiKeyMissing', `Secret ${ref.namespace}/${ref.name} has no non-empty key ${ref.key}`),
    };
  const probe = p.status?.probe;
  const reach = conditionOf(p.status?.conditions, 'BackendReachable');
  // A rotated key keeps the last verdict until the adapter's next probe (Secrets are read by name,
  // not watched; Job calls use the new key at once), so rotation does not flap Ready; a changed
  // endpoint is a different backend.
  if (!probe?.time || !reach || probe.endpoint !== p.spec.endpoint) {
    return { condition: notReady('BackendNotProbed', 'waiting for the adapter to probe the current endpoint') };
  }
  const staleAt = Date.parse(probe.time) + PROBE_STALE_MS;
  if (staleAt <= ctx.now.getTime())
    return {
      condition: notReady('BackendProbeStale', `the last successful contact with the backend was at ${probe.time}`),
    };
  if (reach.status !== 'True') return { condition: notReady(reach.reason, reach.message), recheckAt: staleAt };
  return { condition: ready(`${p.spec.endpoint} answered at ${probe.time}`), recheckAt: staleAt };
}

/** The Ready condition of a class (never True while it is not Accepted). */
export function readiness(
  cls: JobClass,
  acc: ConditionInput,
  ctx: ClassContext,
): { condition: ConditionInput; recheckAt?: number } {
  if (acc.status !== 'True') return { condition: notReady('NotAccepted', `the class is not accepted: ${acc.reason}`) };
  const params = parametersOf(cls, ctx.state)!;
  if (cls.spec.controllerName === KUBERNETES_CONTROLLER)
    return { condition: kubernetesReadiness(params as KubernetesParameters, ctx.state) };
  return openSandboxReadiness(params as OpenSandboxParameters, ctx);
}

/** Non-terminal Jobs that resolved to this class UID (they hold its deletion). */
export function blockingJobs(cls: JobClass, state: State): Job[] {
  return (state.list(X.jobs) as Job[]).filter(
    (j) => j.status?.resolvedJobClass?.uid === cls.metadata.uid && !isFinished(j.status),
  );
}

function deletionBlockedOps(cls: JobClass, ctx: ClassContext): Operation[] {
  const blocking = blockingJobs(cls, ctx.state);
  if (!blocking.length || !cls.metadata.finalizers?.includes(CLASS_FINALIZER)) return [];
  const names = blocking.map((j) => `${j.metadata.namespace ?? ''}/${j.metadata.name ?? ''}`).sort();
  const shown = names.slice(0, 5).join(', ') + (names.length > 5 ? `, and ${names.length - 5} more` : '');
  return [
    eventOp(
      involvedOf(cls, API_VERSION, 'JobClass'),
      {
        type: 'Warning',
        reason: 'DeletionBlocked',
        key: `${cls.metadata.deletionTimestamp ?? ''}|${names.length}`,
        message: `JobClass ${cls.metadata.name ?? ''} is deleted once its ${names.length} non-terminal Job(s) finish: ${shown}`,
      },
      ctx.now,
      COMPONENT,
    ),
  ];
}

/** Names of the JobClasses that are global defaults now (annotated and not terminating), sorted. */
export function globalDefaults(state: State): string[] {
  return (state.list(X.jobClasses) as JobClass[])
    .filter((c) => isDefaultClass(c) && !c.metadata.deletionTimestamp)
    .map((c) => c.metadata.name ?? '')
    .sort();
}

/**
 * The ambiguous-default alert as metrics (the Warning Events below only mark its start):
 * kruntimes_jobclass_global_defaults counts the global defaults, and
 * kruntimes_jobclass_ambiguous_default is 1 exactly while there are several.
 */
export const DEFAULT_GAUGES: StateGauge[] = [
  {
    name: 'kruntimes_jobclass_global_defaults',
    help: 'JobClasses annotated as the global default (is-default-job-class: "true"), terminating ones excluded',
    collect: (state) => [{ value: globalDefaults(state).length }],
  },
  {
    name: 'kruntimes_jobclass_ambiguous_default',
    help: '1 while several JobClasses are global defaults: Jobs without a class stay Accepted=False/AmbiguousDefaultJobClass',
    collect: (state) => [{ value: globalDefaults(state).length > 1 ? 1 : 0 }],
  },
];

/** A Warning on every global default while there is more than one (Jobs without a class then wait). */
export function competingDefaults(cls: JobClass, ctx: ClassContext): Operation[] {
  if (!isDefaultClass(cls) || cls.metadata.deletionTimestamp) return [];
  const names = globalDefaults(ctx.state);
  if (names.length < 2) return [];
  return [
    eventOp(
      involvedOf(cls, API_VERSION, 'JobClass'),
      {
        type: 'Warning',
        reason: 'AmbiguousDefaultJobClass',
        key: names.join(','),
        message: `JobClasses ${names.join(', ')} are all annotated as the global default; Jobs without a class stay Accepted=False/AmbiguousDefaultJobClass until one remains`,
      },
      ctx.now,
      COMPONENT,
    ),
  ];
}

/** All operations for one JobClass. */
export function reconcileClass(cls: JobClass | undefined, ctx: ClassContext): Operation[] {
  if (!cls) return [];
  if (!cls.metadata.deletionTimestamp && !cls.metadata.finalizers?.includes(CLASS_FINALIZER))
    return addFinalizer(X.jobClasses, cls, CLASS_FINALIZER);
  if (cls.metadata.deletionTimestamp && !blockingJobs(cls, ctx.state).length)
    return removeFinalizer(X.jobClasses, cls, CLASS_FINALIZER);
  const acc = acceptance(cls, ctx);
  const { condition: rdy, recheckAt } = readiness(cls, acc, ctx);
  const prev = cls.status?.conditions;
  const conditions = withConditions(prev, [acc, rdy], ctx.now, cls.metadata.generation);
  const status = { ...(cls.status ?? {}), observedGeneration: cls.metadata.generation ?? 0, conditions };
  const ops: Operation[] = [];
  if (!sameJson(cls.status ?? {}, status)) {
    const involved = involvedOf(cls, API_VERSION, 'JobClass');
    ops.push(...conditionEvents(prev, conditions).map((e) => eventOp(involved, e, ctx.now, COMPONENT)));
    ops.push({ op: 'status', resource: X.jobClasses, object: { ...cls, status } });
  }
  if (cls.metadata.deletionTimestamp) ops.push(...deletionBlockedOps(cls, ctx));
  ops.push(...competingDefaults(cls, ctx));
  if (recheckAt !== undefined && isTrue(conditions, 'Ready'))
    ops.push({ op: 'requeue', afterMs: Math.max(1000, recheckAt - ctx.now.getTime() + 1000) });
  return ops;
}
