/** runtimed settings, read once from its environment (the Runtime controller sets them). */

export interface RuntimedConfig {
  podName: string;
  podUID: string;
  namespace: string;
  runtime: string;
  workspaceRoot: string;
  socketPath: string;
  workers: number;
  heartbeatMs: number;
  healthAddress: string;
  healthPort: number;
  /** JSON of the Runtime's spec.artifactStore, when it has one. */
  artifactStore?: Record<string, unknown>;
  artifactRoot: string;
  /** The TLS session port on the Pod IP and the only identity allowed to open operations on it. */
  sessionPort: number;
  sessionSubject: string;
  /** The Runtime Gateway's HTTPS port on the Pod IP (function calls, issue 15). */
  gatewayPort: number;
  /** Concurrent operations one session Run may have on this Pod. */
  sessionMaxOperations: number;
  /** How long runtimed keeps cleaning up deleted Runs' artifacts after SIGTERM (below the Pod's grace period). */
  drainMs: number;
}

/**
 * The socket runtimed listens on and the Runtime Server dials: in the `kruntimes-socket` emptyDir,
 * writable by runtimed only (read-only in the runtime container), never in the Run-writable workspace.
 */
export const RUNTIME_SOCKET = '/run/kruntimes/runtime.sock';

export function loadRuntimedConfig(env: NodeJS.ProcessEnv): RuntimedConfig {
  const need = (k: string): string => {
    const v = env[k];
    if (!v) throw new Error(`runtimed: environment variable ${k} is required`);
    return v;
  };
  const workspaceRoot = env.KRT_WORKSPACE ?? '/workspace';
  const workers = Number(env.KRT_WORKERS ?? '2');
  if (!Number.isInteger(workers) || workers < 1)
    throw new Error(`runtimed: KRT_WORKERS must be a positive integer, got ${env.KRT_WORKERS}`);
  return Object.freeze({
    podName: need('POD_NAME'),
    podUID: need('POD_UID'),
    namespace: need('POD_NAMESPACE'),
    runtime: need('KRT_RUNTIME'),
    workspaceRoot,
    socketPath: env.KRT_RUNTIME_SOCKET ?? RUNTIME_SOCKET,
    workers,
    heartbeatMs: Number(env.KRT_HEARTBEAT_MS ?? '5000'),
    healthAddress: env.POD_IP ?? '0.0.0.0',
    healthPort: Number(env.KRT_HEALTH_PORT ?? '9094'),
    ...(env.KRT_ARTIFACT_STORE ? { artifactStore: JSON.parse(env.KRT_ARTIFACT_STORE) as Record<string, unknown> } : {}),
    artifactRoot: env.KRT_ARTIFACT_ROOT ?? '/var/lib/kruntimes/artifacts',
    sessionPort: Number(env.KRT_SESSION_PORT ?? '9095'),
    sessionSubject: env.KRT_SESSION_SUBJECT ?? 'system:serviceaccount:kruntimes-system:kruntimes-run-extension-api',
    gatewayPort: Number(env.KRT_GATEWAY_PORT ?? '9096'),
    sessionMaxOperations: Number(env.KRT_SESSION_MAX_OPERATIONS ?? '16'),
    drainMs: Number(env.KRT_DRAIN_MS ?? '25000'),
  });
}
