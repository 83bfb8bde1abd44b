/**
 * What a Runtime's Pod template may not do, because it would reach into runtimed (which holds
 * the Pod's ServiceAccount identity and the artifact store's credentials) or hand runtimed's
 * material to Run code. Checked at admission (functions/runtime-template-admission) and applied
 * again when rendering (functions/runtime-controller/render.ts drops unsafe GIT_* variables), so
 * a Runtime admitted before this policy cannot pass them either.
 */

type Json = Record<string, unknown>;

/** GIT_* variables of the runtime container that runtimed's own git fetches honour: TLS trust and
 * HTTP tuning only. Everything else (GIT_SSH_COMMAND, GIT_ASKPASS, GIT_CONFIG_*, GIT_EXEC_PATH,
 * GIT_PROXY_COMMAND, GIT_TRACE*, ...) runs programs or writes files with runtimed's privileges. */
export const RUNTIMED_GIT_ENV = new Set([
  'GIT_SSL_CAINFO',
  'GIT_SSL_CAPATH',
  'GIT_SSL_NO_VERIFY',
  'GIT_SSL_VERSION',
  'GIT_SSL_CIPHER_LIST',
  'GIT_HTTP_LOW_SPEED_LIMIT',
  'GIT_HTTP_LOW_SPEED_TIME',
  'GIT_HTTP_MAX_REQUESTS',
  'GIT_HTTP_USER_AGENT',
  'GIT_TERMINAL_PROMPT',
]);

/** The shared volume Runs write: a path there is Run-controlled, never trusted by runtimed. */
export const WORKSPACE_PATH = '/workspace';

/** Container names kruntimes injects; a template cannot define or configure them. */
export const RESERVED_CONTAINERS = ['runtimed'];

export interface TemplateInput {
  template?: { spec?: Json };
  artifactStore?: {
    driver?: string;
    filesystem?: { volumeClaimName?: string };
    s3?: { credentialsSecretName?: string };
  };
}

interface Container {
  name?: string;
  env?: { name?: string; value?: string; valueFrom?: { secretKeyRef?: { name?: string } } }[];
  envFrom?: { secretRef?: { name?: string } }[];
}

const under = (path: string, root: string): boolean => path === root || path.startsWith(`${root}/`);

/** GIT_* variables runtimed would receive from the first container: a problem per unsafe one. */
export function gitEnvProblems(c: Container | undefined, field: string): string[] {
  const out: string[] = [];
  (c?.env ?? []).forEach((e, i) => {
    const name = e.name ?? '';
    if (!name.startsWith('GIT_')) return;
    if (!RUNTIMED_GIT_ENV.has(name))
      out.push(
        `${field}.env[${i}].name: Forbidden: ${name} is not passed to runtimed's git (it can run programs or write files with runtimed's credentials); allowed GIT_* variables: ${[...RUNTIMED_GIT_ENV].join(', ')}`,
      );
    else if (e.value && under(e.value.replace(/\/+$/, ''), WORKSPACE_PATH))
      out.push(`${field}.env[${i}].value: Forbidden: ${name} may not point into ${WORKSPACE_PATH}, which Runs write`);
  });
  return out;
}

/** Whether runtimed receives this GIT_* variable of the runtime container (render side). */
export const runtimedGitVar = (e: { name?: unknown; value?: unknown }): boolean =>
  typeof e.name === 'string' &&
  RUNTIMED_GIT_ENV.has(e.name) &&
  !(typeof e.value === 'string' && under(e.value.replace(/\/+$/, ''), WORKSPACE_PATH));

const CREDENTIALS_ONLY_RUNTIMED = (secret: string): string =>
  `Forbidden: the artifact store's credentials Secret "${secret}" is given only to runtimed`;

function credentialProblems(c: Container, field: string, secret: string): string[] {
  const out: string[] = [];
  (c.env ?? []).forEach((e, i) => {
    if (e.valueFrom?.secretKeyRef?.name === secret)
      out.push(`${field}.env[${i}].valueFrom.secretKeyRef.name: ${CREDENTIALS_ONLY_RUNTIMED(secret)}`);
  });
  (c.envFrom ?? []).forEach((e, i) => {
    if (e.secretRef?.name === secret)
      out.push(`${field}.envFrom[${i}].secretRef.name: ${CREDENTIALS_ONLY_RUNTIMED(secret)}`);
  });
  return out;
}

/** Secret names a volume mounts (a secret volume or projected secret sources). */
function volumeSecrets(v: Json): (string | undefined)[] {
  const projected = (v.projected as { sources?: { secret?: { name?: string } }[] } | undefined)?.sources ?? [];
  return [(v.secret as { secretName?: string } | undefined)?.secretName, ...projected.map((p) => p.secret?.name)];
}

function volumeProblems(volumes: Json[], input: TemplateInput): string[] {
  const store = input.artifactStore;
  const claim = store?.driver === 'filesystem' ? store.filesystem?.volumeClaimName : undefined;
  const secret = store?.driver === 's3' ? store.s3?.credentialsSecretName : undefined;
  const out: string[] = [];
  volumes.forEach((v, i) => {
    const pvc = (v.persistentVolumeClaim as { claimName?: string } | undefined)?.claimName;
    if (claim && pvc === claim)
      out.push(
        `spec.template.spec.volumes[${i}].persistentVolumeClaim.claimName: Forbidden: the artifact store's claim "${claim}" is mounted only into runtimed`,
      );
    if (secret && volumeSecrets(v).includes(secret))
      out.push(`spec.template.spec.volumes[${i}]: ${CREDENTIALS_ONLY_RUNTIMED(secret)}`);
  });
  return out;
}

function podProblems(spec: Json): string[] {
  const out: string[] = [];
  if (spec.shareProcessNamespace === true)
    out.push(
      "spec.template.spec.shareProcessNamespace: Forbidden: Runs would see runtimed's processes, environment and credentials",
    );
  if (spec.hostPID === true)
    out.push("spec.template.spec.hostPID: Forbidden: Runs would see runtimed's processes, environment and credentials");
  return out;
}

/** Every reason the Runtime's template is refused (empty: admitted). */
export function templateProblems(input: TemplateInput): string[] {
  const spec = input.template?.spec ?? {};
  const containers = (spec.containers as Container[] | undefined) ?? [];
  const inits = (spec.initContainers as Container[] | undefined) ?? [];
  const out = podProblems(spec);
  const all = [
    ...containers.map((c, i) => ({ c, field: `spec.template.spec.containers[${i}]` })),
    ...inits.map((c, i) => ({ c, field: `spec.template.spec.initContainers[${i}]` })),
  ];
  for (const { c, field } of all) {
    if (c.name && RESERVED_CONTAINERS.includes(c.name))
      out.push(
        `${field}.name: Forbidden: "${c.name}" is injected by kruntimes; its image, command, args, env, volumeMounts and securityContext cannot be set in the template (spec.daemonImage selects the image)`,
      );
    const secret = input.artifactStore?.driver === 's3' ? input.artifactStore.s3?.credentialsSecretName : undefined;
    if (secret) out.push(...credentialProblems(c, field, secret));
  }
  out.push(...gitEnvProblems(containers[0], 'spec.template.spec.containers[0]'));
  out.push(...volumeProblems((spec.volumes as Json[] | undefined) ?? [], input));
  return out;
}
