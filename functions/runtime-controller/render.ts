/**
 * Pure rendering of a Runtime into its workload: a DaemonSet of Runtime Pods (default) or a
 * Deployment when spec.replicas is set. Every Pod runs the user's `runtime` container (the
 * language toolchain + Runtime Server) and the injected `runtimed` sidecar, sharing the
 * `workspace` volume; capacity reaches the Pods as kruntimes.io/capacity.* annotations.
 */
import type { KubeObject } from '../../lib/kube/types.ts';
import { runtimedGitVar } from '../../lib/run/template-policy.ts';

export const DEFAULT_DAEMON_IMAGE = 'ghcr.io/kruntimes/kruntimes:0.1.0';
export const RUNTIMED_SA = 'kruntimes-runtimed';
export const RUNTIMED_CLUSTER_ROLE = 'kruntimes:runtimed';
export const RUNTIME_LABEL = 'kruntimes.io/runtime';
/** runtimed's projected ServiceAccount token: mounted into runtimed's container only. */
/** runtimed's uid and gid (the kruntimes image's USER). */
export const RUNTIMED_UID = 65532;
export const RUNTIMED_TOKEN_VOLUME = 'kruntimes-runtimed-token';
/**
 * The Runtime Server channel's directory: runtimed listens on runtime.sock there and the Runtime
 * Server dials in. Writable in runtimed only; the runtime container mounts it read-only, so a Run
 * can neither replace nor plant the socket (it is not in the Run-writable workspace).
 */
export const RUNTIME_SOCKET_VOLUME = 'kruntimes-socket';
export const RUNTIME_SOCKET_DIR = '/run/kruntimes';
const SA_TOKEN_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

type Json = Record<string, unknown>;
interface Container {
  name: string;
  image?: string;
  env?: Json[];
  volumeMounts?: Json[];
  [k: string]: unknown;
}
interface PodSpec {
  containers?: Container[];
  volumes?: Json[];
  serviceAccountName?: string;
  [k: string]: unknown;
}
export interface RuntimeSpec {
  template: { metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> }; spec?: PodSpec };
  replicas?: number;
  port?: number;
  daemonImage?: string;
  capacity?: { resources?: Record<string, string | number> };
  workspace?: Json;
  artifactStore?: {
    driver: 'filesystem' | 's3';
    filesystem?: { volumeClaimName: string };
    s3?: { credentialsSecretName?: string } & Json;
  };
}
export interface Runtime extends KubeObject {
  spec: RuntimeSpec;
  status?: Json;
}

export const workloadName = (rt: Runtime): string => `runtime-${rt.metadata.name}`;

export function selectorLabels(rt: Runtime): Record<string, string> {
  return { runtime: rt.metadata.name ?? '', app: `kruntimes-${rt.metadata.name}` };
}

/** Positive integer capacities as annotations; `runs` defaults to 2. */
export function capacityAnnotations(rt: Runtime): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(rt.spec.capacity?.resources ?? {})) {
    const n = Number(v);
    if (Number.isInteger(n) && n > 0) out[`kruntimes.io/capacity.${k}`] = String(n);
  }
  return out;
}

/** runtimed's TLS session port (sessions.kruntimes.io operations arrive here from the extension API server only). */
export const SESSION_PORT = 9095;

export function workers(rt: Runtime): number {
  return Number(capacityAnnotations(rt)['kruntimes.io/capacity.runs'] ?? 2);
}

/** The TLS/HTTP GIT_* settings of the runtime container (e.g. GIT_SSL_CAINFO) also apply to
 * runtimed's source fetches; any other GIT_* variable (GIT_SSH_COMMAND, GIT_CONFIG_*, ...) would run
 * programs with runtimed's credentials and is never copied (admission also refuses it). */
function gitEnv(rt: Runtime): Json[] {
  return (rt.spec.template.spec?.containers?.[0]?.env ?? []).filter(runtimedGitVar);
}

function runtimedContainer(rt: Runtime): Container {
  const env: Json[] = [
    ...gitEnv(rt),
    { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    { name: 'POD_UID', valueFrom: { fieldRef: { fieldPath: 'metadata.uid' } } },
    { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
    { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
    { name: 'KRT_RUNTIME', value: rt.metadata.name },
    { name: 'KRT_WORKERS', value: String(workers(rt)) },
    { name: 'KRT_SESSION_PORT', value: String(SESSION_PORT) },
  ];
  const mounts: Json[] = [
    { name: 'workspace', mountPath: '/workspace' },
    { name: RUNTIMED_TOKEN_VOLUME, mountPath: SA_TOKEN_DIR, readOnly: true },
    { name: RUNTIME_SOCKET_VOLUME, mountPath: RUNTIME_SOCKET_DIR },
  ];
  const c: Container = {
    name: 'runtimed',
    image: rt.spec.daemonImage || DEFAULT_DAEMON_IMAGE,
    args: ['runtimed'],
    env,
    volumeMounts: mounts,
    ports: [
      { name: 'health', containerPort: 9094 },
      { name: 'session', containerPort: SESSION_PORT },
    ],
    readinessProbe: { httpGet: { path: '/readyz', port: 'health' }, periodSeconds: 1 },
    livenessProbe: { httpGet: { path: '/healthz', port: 'health' }, periodSeconds: 10, failureThreshold: 6 },
    resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '512Mi' } },
    securityContext: {
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      runAsUser: RUNTIMED_UID,
      runAsGroup: RUNTIMED_UID,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    },
  };
  const store = rt.spec.artifactStore;
  if (store) {
    env.push({ name: 'KRT_ARTIFACT_STORE', value: JSON.stringify(store) });
    if (store.driver === 'filesystem')
      mounts.push({ name: 'artifact-store', mountPath: '/var/lib/kruntimes/artifacts' });
    if (store.driver === 's3' && store.s3?.credentialsSecretName)
      c.envFrom = [{ secretRef: { name: store.s3.credentialsSecretName } }];
  }
  return c;
}

/** Volumes only the controller may define: the template's own of these names are dropped. */
const RESERVED_VOLUMES = new Set(['workspace', 'artifact-store', RUNTIMED_TOKEN_VOLUME, RUNTIME_SOCKET_VOLUME]);

/**
 * The runtime container (where Runs execute) never holds a platform credential: the Pod does not
 * automount a ServiceAccount token, and it may not mount the reserved volumes (runtimed's token,
 * the artifact store) nor anything at the service-account path.
 */
function withoutReservedMounts(c: Container): Container {
  const reservedPath = (p: unknown): boolean =>
    typeof p === 'string' && [SA_TOKEN_DIR, RUNTIME_SOCKET_DIR].some((dir) => p.replace(/\/+$/, '').startsWith(dir));
  const mounts = (c.volumeMounts ?? []).filter(
    (m) => !RESERVED_VOLUMES.has(String(m.name)) && !reservedPath(m.mountPath),
  );
  return { ...c, volumeMounts: mounts };
}

function runtimeContainer(c: Container): Container {
  const clean = withoutReservedMounts(c);
  return {
    ...clean,
    volumeMounts: [
      ...(clean.volumeMounts ?? []),
      { name: 'workspace', mountPath: '/workspace' },
      { name: RUNTIME_SOCKET_VOLUME, mountPath: RUNTIME_SOCKET_DIR, readOnly: true },
    ],
  };
}

/** What the ServiceAccount admission plugin would mount into every container, for runtimed only. */
function runtimedTokenVolume(): Json {
  return {
    name: RUNTIMED_TOKEN_VOLUME,
    projected: {
      sources: [
        { serviceAccountToken: { path: 'token', expirationSeconds: 3607 } },
        { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
        {
          downwardAPI: {
            items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }],
          },
        },
      ],
    },
  };
}

export function podTemplate(rt: Runtime): Json {
  const t = rt.spec.template;
  const spec = t.spec ?? {};
  const [first, ...rest] = spec.containers ?? [];
  const containers = [
    runtimeContainer(first ?? { name: 'runtime' }),
    ...rest.filter((c) => c.name !== 'runtimed').map(withoutReservedMounts),
    runtimedContainer(rt),
  ];
  const volumes = (spec.volumes ?? []).filter((v) => !RESERVED_VOLUMES.has(String(v.name)));
  volumes.push(runtimedTokenVolume());
  volumes.push({ name: RUNTIME_SOCKET_VOLUME, emptyDir: {} });
  volumes.push({
    name: 'workspace',
    ...(rt.spec.workspace && Object.keys(rt.spec.workspace).length ? rt.spec.workspace : { emptyDir: {} }),
  });
  if (rt.spec.artifactStore?.driver === 'filesystem' && rt.spec.artifactStore.filesystem) {
    volumes.push({
      name: 'artifact-store',
      persistentVolumeClaim: { claimName: rt.spec.artifactStore.filesystem.volumeClaimName },
    });
  }
  return {
    metadata: {
      labels: { ...(t.metadata?.labels ?? {}), ...selectorLabels(rt), [RUNTIME_LABEL]: rt.metadata.name ?? '' },
      annotations: { ...(t.metadata?.annotations ?? {}), ...capacityAnnotations(rt) },
    },
    spec: {
      ...spec,
      // runtimed (uid 65532) and the runtime container (its image's non-root user) share the
      // workspace through the fsGroup; Runs never run as runtimed's uid.
      securityContext: { fsGroup: RUNTIMED_UID, ...(spec.securityContext as Json | undefined) },
      serviceAccountName: RUNTIMED_SA,
      automountServiceAccountToken: false,
      containers,
      volumes,
    },
  };
}

export function workload(rt: Runtime): { kind: 'DaemonSet' | 'Deployment'; object: KubeObject } {
  const owner = {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'Runtime',
    name: rt.metadata.name ?? '',
    uid: rt.metadata.uid ?? '',
    controller: true,
    blockOwnerDeletion: true,
  };
  const metadata = {
    name: workloadName(rt),
    namespace: rt.metadata.namespace,
    labels: {
      ...selectorLabels(rt),
      [RUNTIME_LABEL]: rt.metadata.name ?? '',
      'app.kubernetes.io/part-of': 'kruntimes',
    },
    ownerReferences: [owner],
  };
  const selector = { matchLabels: selectorLabels(rt) };
  if (rt.spec.replicas !== undefined) {
    return {
      kind: 'Deployment',
      object: { metadata, spec: { replicas: Math.max(1, rt.spec.replicas), selector, template: podTemplate(rt) } },
    };
  }
  return {
    kind: 'DaemonSet',
    object: {
      metadata,
      spec: {
        selector,
        template: podTemplate(rt),
        updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } },
      },
    },
  };
}
