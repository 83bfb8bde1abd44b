/** Test builders for the JobClass functions: an in-memory State and object factories. */
import { R } from '../fn/resources.ts';
import { refPath, withFetched, type Fetched } from '../fn/fetch.ts';
import type { FetchDecl, Operation, ReconcileInput } from '../fn/types.ts';
import type { KubeObject } from '../kube/types.ts';
import type { Condition } from '../run/conditions.ts';
import {
  DEFAULT_CLASS_ANNOTATION,
  GROUP,
  KUBERNETES_CONTROLLER,
  OPENSANDBOX_CONTROLLER,
  X,
  type Job,
  type JobClass,
  type JobSpec,
  type JobStatus,
  type KubernetesParameters,
  type Namespace,
  type OpenSandboxParameters,
  type ResourcePolicy,
} from './api.ts';

export const NOW = new Date('2026-09-17T10:00:00Z');
export const T0 = '2026-09-17T09:00:00Z';

import { FakeState } from '../fn/fake-state.ts';

export { FakeState };

const cond = (type: string, status: Condition['status'], reason = type): Condition => ({
  type,
  status,
  reason,
  message: '',
  lastTransitionTime: T0,
  observedGeneration: 1,
});

export function jobClass(
  name: string,
  o: {
    controller?: string;
    params?: string;
    uid?: string;
    isDefault?: boolean;
    accepted?: boolean;
    ready?: boolean;
    resources?: ResourcePolicy;
    allowed?: Record<string, string>;
    kind?: string;
  } = {},
): JobClass {
  const controller =
    o.controller === 'opensandbox'
      ? OPENSANDBOX_CONTROLLER
      : o.controller === undefined || o.controller === 'kubernetes'
        ? KUBERNETES_CONTROLLER
        : o.controller;
  const kind =
    o.kind ??
    (controller === OPENSANDBOX_CONTROLLER ? 'OpenSandboxExecutionParameters' : 'KubernetesExecutionParameters');
  return {
    metadata: {
      name,
      uid: o.uid ?? `uid-${name}`,
      generation: 1,
      resourceVersion: '1',
      finalizers: [`${GROUP}/jobclass-protection`],
      ...(o.isDefault ? { annotations: { [DEFAULT_CLASS_ANNOTATION]: 'true' } } : {}),
    },
    spec: {
      controllerName: controller,
      parametersRef: { group: GROUP, kind, name: o.params ?? name },
      ...(o.resources ? { resources: o.resources } : {}),
      ...(o.allowed ? { allowedNamespaces: { matchLabels: o.allowed } } : {}),
    },
    status: {
      conditions: [
        cond(
          'Accepted',
          o.accepted === false ? 'False' : 'True',
          o.accepted === false ? 'ParametersNotFound' : 'Accepted',
        ),
        cond(
          'Ready',
          o.ready === false ? 'False' : 'True',
          o.ready === false ? 'RuntimeClassNotFound' : 'BackendReachable',
        ),
      ],
    },
  };
}

export function k8sParams(
  name: string,
  o: { uid?: string; sa?: string; runtimeClass?: string } = {},
): KubernetesParameters {
  return {
    metadata: { name, uid: o.uid ?? `puid-${name}`, resourceVersion: '1' },
    spec: {
      serviceAccountName: o.sa ?? 'ayatori-job',
      ...(o.runtimeClass ? { runtimeClassName: o.runtimeClass } : {}),
    },
  };
}

export function osParams(
  name: string,
  o: {
    uid?: string;
    endpoint?: string;
    poolRef?: string;
    mapping?: 'AdmissionOnly' | 'Native';
    allowSecretEnv?: boolean;
    allowImageAuth?: boolean;
  } = {},
): OpenSandboxParameters {
  return {
    metadata: { name, uid: o.uid ?? `puid-${name}`, resourceVersion: '1', generation: 1 },
    spec: {
      endpoint: o.endpoint ?? 'https://opensandbox.example.internal',
      apiKeySecretRef: { namespace: 'ayatori-system', name: 'opensandbox-api', key: 'api-key' },
      ...(o.poolRef ? { poolRef: o.poolRef } : {}),
      requestMapping: o.mapping ?? 'AdmissionOnly',
      allowSecretEnv: !!o.allowSecretEnv,
      allowImageAuth: !!o.allowImageAuth,
    },
  };
}

export function namespace(
  name: string,
  labels: Record<string, string> = {},
  annotations: Record<string, string> = {},
): Namespace {
  return { metadata: { name, labels: { 'kubernetes.io/metadata.name': name, ...labels }, annotations } };
}

export function secret(ns: string, name: string, data: Record<string, string>, type = 'Opaque', rv = '7'): KubeObject {
  return {
    metadata: { name, namespace: ns, resourceVersion: rv },
    type,
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
  };
}

export function configMap(ns: string, name: string, data: Record<string, string>): KubeObject {
  return { metadata: { name, namespace: ns }, data };
}

export function job(name: string, spec: Partial<JobSpec> = {}, ns = 'team-a'): Job {
  return {
    metadata: { name, namespace: ns, uid: `juid-${name}`, generation: 1, resourceVersion: '10', creationTimestamp: T0 },
    spec: { image: 'busybox:1.36', command: ['sh', '-c', 'echo hi'], ...spec },
  };
}

/** Every status written by the operations. */
export const statuses = (ops: Operation[]): Record<string, unknown>[] =>
  ops
    .filter((o): o is Extract<Operation, { op: 'status' }> => o.op === 'status')
    .map((o) => o.object.status as Record<string, unknown>);
export const events = (ops: Operation[]): { reason: string; type: string; message: string }[] =>
  ops
    .filter((o): o is Extract<Operation, { op: 'create' }> => o.op === 'create' && o.resource === R.events)
    .map((o) => o.object as unknown as { reason: string; type: string; message: string });

/**
 * The handler as the relay runs it for a function with live reads (WatchTrigger.fetch): the refs
 * are computed from a state in which the fetched kinds are invisible (as in the relay, which has
 * no cache of them), and the handler sees only the objects those refs name.
 */
export function withLiveReads(
  decl: FetchDecl | undefined,
  handler: (i: ReconcileInput) => Operation[] | Promise<Operation[]>,
): (i: ReconcileInput) => Promise<Operation[]> {
  return async (i) => {
    if (!decl) return handler(i);
    const refs = decl.refs({ key: i.key, object: i.object, state: withFetched(i.state, decl.resources, new Map()) });
    const fetched: Fetched = new Map(refs.map((r) => [refPath(r), i.state.get(r.resource, r.namespace, r.name)]));
    return handler({ ...i, state: withFetched(i.state, decl.resources, fetched) });
  };
}

/**
 * A minimal host for one Job: runs a handler, applies its status writes and finalizer patches to
 * the Job (or drops them, to simulate a crash before they were written), and advances a clock by
 * the requested requeue.
 */
export class JobHost {
  now = NOW;
  constructor(
    public job: Job,
    readonly state: FakeState,
    private readonly handler: (i: ReconcileInput) => Operation[] | Promise<Operation[]>,
  ) {}

  async step(crashBeforeApply = false): Promise<Operation[]> {
    const key = `${this.job.metadata.namespace ?? ''}/${this.job.metadata.name ?? ''}`;
    const ops = await this.handler({ key, object: this.job, state: this.state, now: this.now });
    if (crashBeforeApply) return ops;
    for (const op of ops) {
      if (op.op === 'status' && op.resource === X.jobs)
        this.job = { ...this.job, status: op.object.status as JobStatus };
      if (op.op === 'patch' && op.resource === X.jobs)
        this.job = {
          ...this.job,
          metadata: {
            ...this.job.metadata,
            finalizers: (op.patch as { metadata: { finalizers: string[] } }).metadata.finalizers,
          },
        };
    }
    const wait = ops
      .filter((o): o is Extract<Operation, { op: 'requeue' }> => o.op === 'requeue')
      .map((o) => o.afterMs);
    this.now = new Date(this.now.getTime() + (wait.length ? Math.min(...wait) : 1000));
    return ops;
  }

  async until(pred: (j: Job) => boolean, max = 30): Promise<void> {
    for (let i = 0; i < max && !pred(this.job); i++) await this.step();
    if (!pred(this.job)) throw new Error(`condition not reached; status ${JSON.stringify(this.job.status)}`);
  }
}

/** An accepted Job of the OpenSandbox class "microvm" (frozen UIDs as the builders create them). */
export function acceptedOpenSandboxJob(
  spec: Partial<JobSpec> = {},
  limits: Record<string, string> = { cpu: '2', memory: '2Gi' },
): Job {
  const j = job('train', spec);
  return {
    ...j,
    status: {
      conditions: [{ type: 'Accepted', status: 'True', reason: 'Accepted', message: '', lastTransitionTime: T0 }],
      resolvedJobClass: {
        name: 'microvm',
        uid: 'uid-microvm',
        controllerName: OPENSANDBOX_CONTROLLER,
        parametersRef: { group: GROUP, kind: 'OpenSandboxExecutionParameters', name: 'microvm', uid: 'puid-microvm' },
      },
      effectiveResources: { limits },
    },
  };
}

export { R, X };
