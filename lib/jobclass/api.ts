/**
 * The execution.ayatori.ddupan.top/v1alpha1 API as the JobClass functions see it: resource
 * descriptors, names of annotations/labels/finalizers, and the object shapes of
 * crds/execution/*.yaml (generated types). Shared by the jobclass-* functions (this folder has no index.ts, so it
 * is a library, not a function).
 */
import type * as gen from '../api/generated/execution.ts';
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

// Object shapes: generated from crds/execution/*.yaml (scripts/gen-types.ts ->
// lib/api/generated/execution.ts), never written by hand. Only `metadata` comes from KubeObject
// (the CRD schema leaves it open) and conditions use the shared Condition type (same shape).
type GenJobClass = gen.JobClass;
type GenJob = gen.Job;
type GenJobStatus = NonNullable<GenJob['status']>;
type GenOsParams = gen.OpenSandboxExecutionParameters;

export type ResourcePolicy = NonNullable<GenJobClass['spec']['resources']>;
export type Requirements = NonNullable<ResourcePolicy['defaults']>;
export type CpuMemory = NonNullable<Requirements['requests']>;
export type ParametersRef = GenJobClass['spec']['parametersRef'];

export interface JobClass extends KubeObject {
  spec: Omit<GenJobClass['spec'], 'allowedNamespaces'> & { allowedNamespaces?: LabelSelector };
  status?: Omit<NonNullable<GenJobClass['status']>, 'conditions'> & { conditions?: Condition[] };
}

export interface KubernetesParameters extends KubeObject {
  spec: gen.KubernetesExecutionParameters['spec'];
}

export type SecretKeyRef = GenOsParams['spec']['apiKeySecretRef'];

export interface OpenSandboxParameters extends KubeObject {
  spec: GenOsParams['spec'];
  status?: Omit<NonNullable<GenOsParams['status']>, 'conditions'> & { conditions?: Condition[] };
}

export type Parameters = KubernetesParameters | OpenSandboxParameters;

export type EnvVar = NonNullable<GenJob['spec']['env']>[number];
export type KeyRef = NonNullable<NonNullable<EnvVar['valueFrom']>['secretKeyRef']>;
export type JobSpec = GenJob['spec'];
export type ResolvedJobClass = NonNullable<GenJobStatus['resolvedJobClass']>;
export type ExecutionRef = NonNullable<GenJobStatus['execution']>;
export type CreateIntent = NonNullable<ExecutionRef['createIntent']>;
export type Phase = NonNullable<GenJobStatus['phase']>;
export type JobStatus = Omit<GenJobStatus, 'conditions'> & { conditions?: Condition[] };

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
