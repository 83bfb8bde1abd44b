/**
 * JobClass controller: reports Accepted (controllerName is ours, parametersRef is a supported
 * kind that exists and is valid, resource policy and namespace selector are consistent) and
 * Ready (Kubernetes: the RuntimeClass exists; OpenSandbox: API key Secret present and the
 * adapter's last probe of the current endpoint/key succeeded recently), with an Event per
 * transition, and the AmbiguousDefaultJobClass alert on every global default while there are
 * several (a new default wakes the others). A protection finalizer holds a class deletion until
 * no non-terminal Job references its UID. Woken by its parameters, RuntimeClasses, Jobs and
 * other global defaults; reads API key Secrets by name.
 */
import { R } from '../../lib/fn/resources.ts';
import type { FunctionDef, ObjectRef, Operation, ReconcileInput, State } from '../../lib/fn/types.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import {
  OPENSANDBOX_CONTROLLER,
  X,
  type Job,
  type JobClass,
  type KubernetesParameters,
  type OpenSandboxParameters,
} from '../../lib/jobclass/api.ts';
import { parametersOf } from '../../lib/jobclass/controllers.ts';
import { endpointPolicy } from '../../lib/jobclass/config.ts';
import { isDefaultClass } from '../../lib/jobclass/resolve.ts';
import { DEFAULT_GAUGES, competingDefaults, reconcileClass } from './core.ts';

/** Classes affected by a change to a dependency key (@params:Kind:name, @runtimeclass:name). */
export function affectedClasses(key: string, state: State): JobClass[] {
  const [what = '', a = '', b = ''] = key.slice(1).split(':');
  const classes = state.list(X.jobClasses) as JobClass[];
  switch (what) {
    case 'params':
      return classes.filter((c) => c.spec.parametersRef.kind === a && c.spec.parametersRef.name === b);
    case 'runtimeclass':
      return classes.filter(
        (c) => (parametersOf(c, state) as KubernetesParameters | undefined)?.spec.runtimeClassName === a,
      );
    default:
      return [];
  }
}

/** The API key Secrets an invocation reads by name (live GETs; Secrets are never listed or watched). */
export function secretRefs({
  key,
  object,
  state,
}: {
  key: string;
  object: KubeObject | undefined;
  state: State;
}): ObjectRef[] {
  const classes = key.startsWith('@') ? affectedClasses(key, state) : object ? [object as JobClass] : [];
  return classes.flatMap((c) => {
    if (c.spec.controllerName !== OPENSANDBOX_CONTROLLER) return [];
    const ref = (parametersOf(c, state) as OpenSandboxParameters | undefined)?.spec.apiKeySecretRef;
    return ref ? [{ resource: R.secrets, namespace: ref.namespace, name: ref.name }] : [];
  });
}

/** Wakes every global default when one appears, changes or goes: a new second default must alert on the first one too. */
export const DEFAULTS_KEY = '@defaults';

export function handle({ key, object, state, now }: ReconcileInput): Operation[] {
  const ctx = { state, now, endpointPolicy: endpointPolicy() };
  if (!key.startsWith('@')) return reconcileClass(object as JobClass | undefined, ctx);
  if (key === DEFAULTS_KEY)
    return (state.list(X.jobClasses) as JobClass[]).filter(isDefaultClass).flatMap((c) => competingDefaults(c, ctx));
  return affectedClasses(key, state).flatMap((c) => reconcileClass(c, ctx).filter((op) => op.op !== 'requeue'));
}

const fn: FunctionDef = {
  name: 'jobclass-controller',
  description: 'Reports JobClass Accepted/Ready with Events and protects classes referenced by non-terminal Jobs.',
  trigger: {
    type: 'watch',
    resource: X.jobClasses,
    also: [
      { resource: X.jobClasses, map: (o) => (isDefaultClass(o as JobClass) ? [DEFAULTS_KEY] : []) },
      {
        resource: X.kubernetesParameters,
        map: (o) => [`@params:KubernetesExecutionParameters:${o.metadata.name ?? ''}`],
      },
      {
        resource: X.openSandboxParameters,
        map: (o) => [`@params:OpenSandboxExecutionParameters:${o.metadata.name ?? ''}`],
      },
      { resource: X.runtimeClasses, map: (o) => [`@runtimeclass:${o.metadata.name ?? ''}`] },
      {
        resource: X.jobs,
        map: (o) => {
          const c = (o as Job).status?.resolvedJobClass?.name;
          return c ? [c] : [];
        },
      },
    ],
    // API key Secrets are read by name (no Secret watch): a Secret created or fixed later is seen
    // through the adapter's probe verdict on the parameters object, which wakes the class.
    fetch: { resources: [R.secrets], refs: secretRefs },
  },
  concurrency: 2,
  // The ambiguous-default alert as a metric an alert rule can hold on (docs/jobclass.md).
  gauges: DEFAULT_GAUGES,
  rbac: [
    {
      apiGroups: ['execution.ayatori.ddupan.top'],
      resources: ['jobclasses'],
      verbs: ['get', 'list', 'watch', 'patch'],
    },
    {
      apiGroups: ['execution.ayatori.ddupan.top'],
      resources: ['jobclasses/status'],
      verbs: ['get', 'update', 'patch'],
    },
    {
      apiGroups: ['execution.ayatori.ddupan.top'],
      resources: ['kubernetesexecutionparameters', 'opensandboxexecutionparameters', 'jobs'],
      verbs: ['get', 'list', 'watch'],
    },
    { apiGroups: ['node.k8s.io'], resources: ['runtimeclasses'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: [''], resources: ['secrets'], verbs: ['get'] },
    { apiGroups: [''], resources: ['events'], verbs: ['create'] },
  ],
  handler: handle,
};
export default fn;
