/**
 * Finalizer edits as merge patches guarded by resourceVersion: a concurrent change answers 409
 * and the host requeues at once, so a finalizer list is never overwritten from a stale read.
 * Also the parameters protection every adapter applies to its own parameters kind.
 */
import type { Operation, Resource } from '../fn/types.ts';
import type { KubeObject } from '../kube/types.ts';
import { API_VERSION, GROUP, PARAMETERS_FINALIZER, type JobClass, type Parameters } from './api.ts';
import { eventOp, involvedOf } from './events.ts';

export const hasFinalizer = (o: KubeObject, f: string): boolean => (o.metadata.finalizers ?? []).includes(f);

function patchFinalizers(resource: Resource, o: KubeObject, finalizers: string[]): Operation {
  return {
    op: 'patch',
    resource,
    ...(o.metadata.namespace ? { namespace: o.metadata.namespace } : {}),
    name: o.metadata.name ?? '',
    patchType: 'merge',
    patch: { metadata: { resourceVersion: o.metadata.resourceVersion, finalizers } },
  };
}

/** Adds the finalizer (never to an object that is already being deleted). */
export function addFinalizer(resource: Resource, o: KubeObject, f: string): Operation[] {
  if (hasFinalizer(o, f) || o.metadata.deletionTimestamp) return [];
  return [patchFinalizers(resource, o, [...(o.metadata.finalizers ?? []), f])];
}

export function removeFinalizer(resource: Resource, o: KubeObject, f: string): Operation[] {
  if (!hasFinalizer(o, f)) return [];
  return [
    patchFinalizers(
      resource,
      o,
      (o.metadata.finalizers ?? []).filter((x) => x !== f),
    ),
  ];
}

/** Classes whose parametersRef names this parameters object (terminating classes included). */
export function referencingClasses(params: Parameters, kind: string, classes: JobClass[]): JobClass[] {
  return classes.filter(
    (c) =>
      c.spec.parametersRef.kind === kind &&
      c.spec.parametersRef.name === params.metadata.name &&
      c.spec.parametersRef.group === GROUP,
  );
}

/**
 * Parameters protection: while any JobClass references the object it keeps the finalizer and a
 * deletion is reported (Warning DeletionBlocked) instead of happening silently; once no class
 * references it, the finalizer is released.
 */
export function protectParameters(
  resource: Resource,
  params: Parameters | undefined,
  classes: JobClass[],
  now: Date,
  component: string,
): Operation[] {
  if (!params) return [];
  const refs = referencingClasses(params, resource.kind, classes);
  if (!params.metadata.deletionTimestamp) return addFinalizer(resource, params, PARAMETERS_FINALIZER);
  if (!refs.length) return removeFinalizer(resource, params, PARAMETERS_FINALIZER);
  if (!hasFinalizer(params, PARAMETERS_FINALIZER)) return [];
  const names = refs.map((c) => c.metadata.name ?? '').sort();
  return [
    eventOp(
      involvedOf(params, API_VERSION, resource.kind),
      {
        type: 'Warning',
        reason: 'DeletionBlocked',
        key: `${params.metadata.deletionTimestamp}|${names.join(',')}`,
        message: `${resource.kind} ${params.metadata.name ?? ''} is still referenced by JobClass ${names.join(', ')}; it is deleted once no JobClass references it`,
      },
      now,
      component,
    ),
  ];
}
