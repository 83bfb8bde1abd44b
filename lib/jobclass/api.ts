/**
 * The execution.ayatori.ddupan.top/v1alpha1 API as the JobClass functions see it: resource
 * descriptors, names of annotations/labels/finalizers, and the object shapes of
 * crds/execution/*.yaml. Shared by the jobclass-* functions (this folder has no index.ts, so it
 * is a library, not a function).
 */
import type { Resource } from '../fn/types.ts';
import type { KubeObject } from '../kube/types.ts';
import type { Condition } from '../run/conditions.ts';
import type { LabelSelector } from '../kube/selector.ts';

export const GROUP = 'execution.ayatori.ddupan.top';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

export const KUBERNETES_CONTROLLER = `${GROUP}/kubernetes`;
export const OPENSANDBOX_CONTROLLER = `${GROUP}/opensandbox`;

export const DEFAULT_CLASS_ANNOTATION = `${GROUP}/is-default-job-class`;
export const NAMESPACE_DEFAULT_ANNOTATION = `${GROUP}/default-job-class`;
export const CLASS_FINALIZER = `${GROUP}/jobclass-protection`;
export const PARAMETERS_FINALIZER = `${GROUP}/parameters-protection`;
export const SANDBOX_FINALIZER = `${GROUP}/opensandbox-cleanup`;
export const JOB_UID_LABEL = `${GROUP}/job-uid`;
export const JOB_NAME_LABEL = `${GROUP}/job-name`;
export const JOB_NAMESPACE_LABEL = `${GROUP}/job-namespace`;
export const CLASS_UID_LABEL = `${GROUP}/jobclass-uid`;

const exec = (resource: string, kind: string, namespaced: boolean): Resource => ({
  group: GROUP,
  version: VERSION,
  resource,
  kind,
  namespaced,
});

export const X = {
  jobClasses: exec('jobclasses', 'JobClass', false),
  jobs: exec('jobs', 'Job', true),
  kubernetesParameters: exec('kubernetesexecutionparameters', 'KubernetesExecutionParameters', false),
  openSandboxParameters: exec('opensandboxexecutionparameters', 'OpenSandboxExecutionParameters', false),
  batchJobs: { group: 'batch', version: 'v1', resource: 'jobs', kind: 'Job', namespaced: true },
  namespaces: { group: '', version: 'v1', resource: 'namespaces', kind: 'Namespace', namespaced: false },
  runtimeClasses: {
    group: 'node.k8s.io',
    version: 'v1',
    resource: 'runtimeclasses',
    kind: 'RuntimeClass',
    namespaced: false,
  },
} satisfies Record<string, Resource>;

export interface CpuMemory {
  cpu?: string;
  memory?: string;
}
export interface Requirements {
  requests?: CpuMemory;
  limits?: CpuMemory;
}
export interface ResourcePolicy {
  defaults?: Requirements;
  minimum?: Requirements;
  maximum?: Requirements;
}

export interface ParametersRef {
  group: string;
  kind: string;
  name: string;
}

export interface JobClass extends KubeObject {
  spec: {
    controllerName: string;
    parametersRef: ParametersRef;
    allowedNamespaces?: LabelSelector;
    resources?: ResourcePolicy;
  };
  status?: { observedGeneration?: number; conditions?: Condition[] };
}

export interface KubernetesParameters extends KubeObject {
  spec: {
    serviceAccountName: string;
    runtimeClassName?: string;
    scheduling?: { nodeSelector?: Record<string, string>; tolerations?: Record<string, unknown>[] };
    podSecurityContext?: Record<string, unknown>;
    imagePullPolicy?: 'Always' | 'IfNotPresent' | 'Never';
  };
}

export interface OpenSandboxParameters extends KubeObject {
  spec: {
    endpoint: string;
    apiKeySecretRef: SecretKeyRef;
    poolRef?: string;
    requestMapping?: 'AdmissionOnly' | 'Native';
    allowSecretEnv?: boolean;
    allowImageAuth?: boolean;
  };
  status?: {
    observedGeneration?: number;
    conditions?: Condition[];
    probe?: { endpoint?: string; apiKeySecretResourceVersion?: string; time?: string };
  };
}

export type Parameters = KubernetesParameters | OpenSandboxParameters;

export interface KeyRef {
  name: string;
  key: string;
  optional?: boolean;
}
export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: KeyRef; configMapKeyRef?: KeyRef };
}

export interface JobSpec {
  jobClassName?: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  imagePullSecret?: { name: string };
  resources?: Requirements;
  activeDeadlineSeconds?: number;
  ttlSecondsAfterFinished?: number;
  cancelRequested?: boolean;
}

export interface ResolvedJobClass {
  name: string;
  uid: string;
  controllerName: string;
  parametersRef: ParametersRef & { uid?: string };
}

export interface CreateIntent {
  attempt: number;
  requestedAt: string;
  outcome: 'Pending' | 'Rejected';
}

export interface SecretKeyRef {
  namespace: string;
  name: string;
  key: string;
}

export interface ExecutionRef {
  controllerName: string;
  apiVersion?: string;
  kind?: string;
  name?: string;
  uid?: string;
  sandboxID?: string;
  endpoint?: string;
  apiKeySecretRef?: SecretKeyRef;
  createIntent?: CreateIntent;
  cancelIssuedAt?: string;
}

export type Phase = 'Pending' | 'Scheduled' | 'Running' | 'Succeeded' | 'Failed' | 'Unknown';

export interface JobStatus {
  observedGeneration?: number;
  phase?: Phase;
  message?: string;
  conditions?: Condition[];
  resolvedJobClass?: ResolvedJobClass;
  effectiveResources?: Requirements;
  execution?: ExecutionRef;
  startTime?: string;
  completionTime?: string;
}

export interface Job extends KubeObject {
  spec: JobSpec;
  status?: JobStatus;
}

export interface Namespace extends KubeObject {
  status?: unknown;
}
export interface Secret extends KubeObject {
  type?: string;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}
export interface ConfigMap extends KubeObject {
  data?: Record<string, string>;
  binaryData?: Record<string, string>;
}

/** The string map `data` of a Secret or ConfigMap read from the untyped state. */
export function dataOf(o: KubeObject): Record<string, string> {
  const d = o.data;
  return d && typeof d === 'object' ? (d as Record<string, string>) : {};
}
