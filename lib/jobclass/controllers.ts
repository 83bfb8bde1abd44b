/**
 * The controllers this project implements and the parameters kind each accepts (GatewayClass
 * style: controllerName + one level of parametersRef). A class naming another controller is
 * not ours to accept; a reference to any other kind (ConfigMap, Secret, unknown CRDs) is
 * InvalidParametersReference.
 */
import type { Resource, State } from '../fn/types.ts';
import {
  GROUP,
  KUBERNETES_CONTROLLER,
  OPENSANDBOX_CONTROLLER,
  X,
  type Job,
  type JobClass,
  type OpenSandboxParameters,
  type Parameters,
  type ParametersRef,
  type Requirements,
} from './api.ts';
import { usesSecretEnv } from './envrefs.ts';
import type { Problem } from './resolve.ts';
import { RESOURCES, sameQuantity } from './resources.ts';

export interface ControllerInfo {
  parametersGroup: string;
  parametersKind: string;
  parameters: Resource;
}

export const CONTROLLERS: Record<string, ControllerInfo> = {
  [KUBERNETES_CONTROLLER]: {
    parametersGroup: GROUP,
    parametersKind: 'KubernetesExecutionParameters',
    parameters: X.kubernetesParameters,
  },
  [OPENSANDBOX_CONTROLLER]: {
    parametersGroup: GROUP,
    parametersKind: 'OpenSandboxExecutionParameters',
    parameters: X.openSandboxParameters,
  },
};

export const isSupportedController = (name: string): boolean => Object.hasOwn(CONTROLLERS, name);

/** Why the class's parametersRef is not a kind its controller supports, or undefined. */
export function parametersRefProblem(controllerName: string, ref: ParametersRef): string | undefined {
  const info = CONTROLLERS[controllerName];
  if (!info) return undefined;
  if (ref.group !== info.parametersGroup || ref.kind !== info.parametersKind) {
    return `controller ${controllerName} supports parametersRef ${info.parametersKind}.${info.parametersGroup}, not ${ref.kind}.${ref.group || 'core'}`;
  }
  return undefined;
}

/** The parameters object a class references (undefined when unsupported or missing). */
export function parametersOf(cls: JobClass, state: State): Parameters | undefined {
  const info = CONTROLLERS[cls.spec.controllerName];
  if (!info || parametersRefProblem(cls.spec.controllerName, cls.spec.parametersRef)) return undefined;
  return state.get(info.parameters, undefined, cls.spec.parametersRef.name) as Parameters | undefined;
}

function limitsProblem(p: OpenSandboxParameters, eff: Requirements): Problem | undefined {
  if (p.spec.poolRef) return undefined;
  const missing = RESOURCES.filter((r) => eff.limits?.[r] === undefined);
  if (!missing.length) return undefined;
  return {
    reason: 'LimitsRequired',
    message: `OpenSandbox needs resourceLimits outside pool mode: set spec.resources.limits.${missing.join(' and ')} (or class defaults)`,
  };
}

function nativeProblem(p: OpenSandboxParameters, eff: Requirements): Problem | undefined {
  if ((p.spec.requestMapping ?? 'AdmissionOnly') !== 'Native') return undefined;
  for (const r of RESOURCES) {
    const req = eff.requests?.[r];
    if (req !== undefined && !sameQuantity(req, eff.limits?.[r])) {
      return {
        reason: 'ResourcesNotRepresentable',
        message: `requestMapping Native: the OpenSandbox API carries only resourceLimits, so requests.${r} (${req}) must equal limits.${r} (${eff.limits?.[r] ?? 'unset'}); adapters never lower effective resources`,
      };
    }
  }
  return undefined;
}

/**
 * Controller-specific reasons a Job cannot run on the class: OpenSandbox Secret env and image auth
 * need explicit allowances, and effective resources must be representable without lowering them.
 */
export function controllerJobProblem(
  controllerName: string,
  job: Job,
  params: Parameters | undefined,
  effective: Requirements,
): Problem | undefined {
  if (controllerName !== OPENSANDBOX_CONTROLLER || !params) return undefined;
  const p = params as OpenSandboxParameters;
  if (usesSecretEnv(job) && !p.spec.allowSecretEnv) {
    return {
      reason: 'SecretEnvNotAllowed',
      message: `spec.env uses secretKeyRef, but ${p.metadata.name ?? ''} does not set allowSecretEnv`,
    };
  }
  if (job.spec.imagePullSecret && !p.spec.allowImageAuth) {
    return {
      reason: 'ImageAuthNotAllowed',
      message: `spec.imagePullSecret is set, but ${p.metadata.name ?? ''} does not set allowImageAuth`,
    };
  }
  if (!job.spec.command?.length) {
    return {
      reason: 'CommandRequired',
      message:
        'OpenSandbox needs an explicit entrypoint: set spec.command (the lifecycle API requires entrypoint with an image)',
    };
  }
  return limitsProblem(p, effective) ?? nativeProblem(p, effective);
}
