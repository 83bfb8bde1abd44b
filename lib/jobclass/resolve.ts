/**
 * JobClass resolution (seed "默认 class 选择"): an explicit spec.jobClassName always wins; else
 * the namespace annotation execution.ayatori.ddupan.top/default-job-class; else the single
 * JobClass annotated execution.ayatori.ddupan.top/is-default-job-class: "true". Several global
 * defaults are ambiguous: there is no newest-wins rule, because isolation and permissions must
 * not depend on creation time. The result is frozen into status.resolvedJobClass.
 */
import { conditionOf, isTrue } from './events.ts';
import { matchesSelector, validateSelector } from '../kube/selector.ts';
import {
  DEFAULT_CLASS_ANNOTATION,
  NAMESPACE_DEFAULT_ANNOTATION,
  type JobClass,
  type Namespace,
  type Parameters,
  type ResolvedJobClass,
} from './api.ts';

export type Via = 'explicit' | 'namespace' | 'global';
export type Resolution =
  | { kind: 'resolved'; cls: JobClass; via: Via }
  | { kind: 'notFound'; name: string; via: Exclude<Via, 'global'> }
  | { kind: 'none' }
  | { kind: 'ambiguous'; names: string[] };

export const isDefaultClass = (c: JobClass): boolean => c.metadata.annotations?.[DEFAULT_CLASS_ANNOTATION] === 'true';

/** Resolves the class for a Job without a frozen resolution. Terminating classes are never global defaults. */
export function resolveClass(
  jobClassName: string | undefined,
  ns: Namespace | undefined,
  classes: JobClass[],
): Resolution {
  const byName = (name: string): JobClass | undefined => classes.find((c) => c.metadata.name === name);
  if (jobClassName) {
    const cls = byName(jobClassName);
    return cls ? { kind: 'resolved', cls, via: 'explicit' } : { kind: 'notFound', name: jobClassName, via: 'explicit' };
  }
  const nsDefault = ns?.metadata.annotations?.[NAMESPACE_DEFAULT_ANNOTATION];
  if (nsDefault) {
    const cls = byName(nsDefault);
    return cls ? { kind: 'resolved', cls, via: 'namespace' } : { kind: 'notFound', name: nsDefault, via: 'namespace' };
  }
  const defaults = classes.filter((c) => isDefaultClass(c) && !c.metadata.deletionTimestamp);
  if (defaults.length === 0) return { kind: 'none' };
  if (defaults.length > 1) return { kind: 'ambiguous', names: defaults.map((c) => c.metadata.name ?? '').sort() };
  return { kind: 'resolved', cls: defaults[0]!, via: 'global' };
}

/** The frozen reference for a class (and its parameters object when it exists). */
export function freeze(cls: JobClass, params: Parameters | undefined): ResolvedJobClass {
  const ref = cls.spec.parametersRef;
  return {
    name: cls.metadata.name ?? '',
    uid: cls.metadata.uid ?? '',
    controllerName: cls.spec.controllerName,
    parametersRef: {
      group: ref.group,
      kind: ref.kind,
      name: ref.name,
      ...(params?.metadata.uid ? { uid: params.metadata.uid } : {}),
    },
  };
}

export interface Problem {
  reason: string;
  message: string;
}

/** Why the frozen class cannot be used any more (gone, or recreated under the same name). */
export function frozenClassProblem(frozen: ResolvedJobClass, cls: JobClass | undefined): Problem | undefined {
  if (!cls)
    return {
      reason: 'JobClassNotFound',
      message: `JobClass ${frozen.name} (uid ${frozen.uid}) no longer exists; the Job keeps its resolved class and is not moved to another one`,
    };
  if (cls.metadata.uid !== frozen.uid)
    return {
      reason: 'JobClassReplaced',
      message: `JobClass ${frozen.name} was recreated (uid ${frozen.uid} -> ${cls.metadata.uid ?? '?'}); the Job is not moved to the new object`,
    };
  return undefined;
}

/** Why the frozen parameters object cannot be used (gone, or recreated under the same name). */
export function frozenParametersProblem(frozen: ResolvedJobClass, params: Parameters | undefined): Problem | undefined {
  const ref = frozen.parametersRef;
  if (!params) return { reason: 'ParametersNotFound', message: `${ref.kind} ${ref.name} does not exist` };
  if (ref.uid && params.metadata.uid !== ref.uid)
    return {
      reason: 'ParametersReplaced',
      message: `${ref.kind} ${ref.name} was recreated (uid ${ref.uid} -> ${params.metadata.uid ?? '?'}); the Job does not adopt the new object`,
    };
  return undefined;
}

/** Whether the namespace may use the class (omitted selector: every namespace). */
export function namespaceAllowed(cls: JobClass, ns: Namespace | undefined): boolean {
  const sel = cls.spec.allowedNamespaces;
  if (!sel) return true;
  if (!ns || validateSelector(sel) !== undefined) return false;
  return matchesSelector(sel, ns.metadata.labels ?? {});
}

/** The frozen class must still be the same object and Ready before a new execution is created. */
export function classGate(frozen: ResolvedJobClass, cls: JobClass | undefined): Problem | undefined {
  const cp = frozenClassProblem(frozen, cls);
  if (cp) return cp;
  if (isTrue(cls!.status?.conditions, 'Ready')) return undefined;
  const c = conditionOf(cls!.status?.conditions, 'Ready');
  return {
    reason: 'JobClassNotReady',
    message: `JobClass ${frozen.name} is not Ready${c ? ` (${c.reason}: ${c.message})` : ''}; waiting for the backend`,
  };
}
