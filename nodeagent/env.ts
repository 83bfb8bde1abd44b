/** Container environment: value, valueFrom (downward API, Secrets, ConfigMaps), envFrom, $(VAR) expansion. */
import type { Container, EnvVar, KeySelector, Pod } from './pod-types.ts';

export interface DataSource {
  /** Returns decoded data of a Secret or ConfigMap, or undefined when it does not exist. */
  secret(namespace: string, name: string): Promise<Record<string, string> | undefined>;
  configMap(namespace: string, name: string): Promise<Record<string, string> | undefined>;
}

export class EnvError extends Error {
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/** Resolves a downward-API field path against the pod. */
export function fieldValue(pod: Pod, fieldPath: string, podIP: string, hostIP: string): string {
  const m = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(fieldPath);
  if (m) return (m[1] === 'labels' ? pod.metadata.labels : pod.metadata.annotations)?.[m[2] ?? ''] ?? '';
  const values: Record<string, string | undefined> = {
    'metadata.name': pod.metadata.name,
    'metadata.namespace': pod.metadata.namespace,
    'metadata.uid': pod.metadata.uid,
    'spec.nodeName': pod.spec.nodeName,
    'spec.serviceAccountName': pod.spec.serviceAccountName,
    'status.podIP': podIP,
    'status.podIPs': podIP,
    'status.hostIP': hostIP,
    'status.hostIPs': hostIP,
  };
  if (!(fieldPath in values)) throw new EnvError('CreateContainerConfigError', `unsupported fieldRef ${fieldPath}`);
  return values[fieldPath] ?? '';
}

/** Replaces $(VAR) with earlier values; $$(VAR) escapes; unknown references stay as written. */
export function expandVars(input: string, vars: Record<string, string>): string {
  return input.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (whole, name: string | undefined) => {
    if (whole === '$$') return '$';
    return name !== undefined && name in vars ? (vars[name] ?? '') : whole;
  });
}

async function keyRef(
  src: DataSource,
  kind: 'secret' | 'configMap',
  ns: string,
  sel: KeySelector,
  envName: string,
): Promise<string | undefined> {
  const data = await (kind === 'secret' ? src.secret(ns, sel.name ?? '') : src.configMap(ns, sel.name ?? ''));
  const what = kind === 'secret' ? 'secret' : 'configmap';
  if (data === undefined) {
    if (sel.optional) return undefined;
    throw new EnvError('CreateContainerConfigError', `${what} "${sel.name}" not found (env ${envName})`);
  }
  if (!(sel.key in data)) {
    if (sel.optional) return undefined;
    throw new EnvError(
      'CreateContainerConfigError',
      `couldn't find key ${sel.key} in ${what} ${ns}/${sel.name} (env ${envName})`,
    );
  }
  return data[sel.key];
}

async function resolveOne(
  v: EnvVar,
  pod: Pod,
  c: Container,
  src: DataSource,
  ips: { pod: string; host: string },
): Promise<string | undefined> {
  const ns = pod.metadata.namespace ?? 'default';
  const from = v.valueFrom;
  if (!from) return v.value ?? '';
  if (from.fieldRef) return fieldValue(pod, from.fieldRef.fieldPath, ips.pod, ips.host);
  if (from.secretKeyRef) return keyRef(src, 'secret', ns, from.secretKeyRef, v.name);
  if (from.configMapKeyRef) return keyRef(src, 'configMap', ns, from.configMapKeyRef, v.name);
  if (from.resourceFieldRef) {
    const [kind, res] = from.resourceFieldRef.resource.split('.');
    const bag = kind === 'limits' ? c.resources?.limits : c.resources?.requests;
    return bag?.[res ?? ''] ?? '0';
  }
  return '';
}

async function applyEnvFrom(env: Record<string, string>, ns: string, c: Container, src: DataSource): Promise<void> {
  for (const ef of c.envFrom ?? []) {
    const ref = ef.configMapRef ?? ef.secretRef;
    if (!ref) continue;
    const data = await (ef.secretRef ? src.secret(ns, ref.name) : src.configMap(ns, ref.name));
    if (data === undefined) {
      if (ref.optional) continue;
      throw new EnvError(
        'CreateContainerConfigError',
        `${ef.secretRef ? 'secret' : 'configmap'} "${ref.name}" not found (envFrom)`,
      );
    }
    for (const [k, v] of Object.entries(data)) env[`${ef.prefix ?? ''}${k}`] = v;
  }
}

export async function containerEnv(
  pod: Pod,
  c: Container,
  src: DataSource,
  base: Record<string, string>,
  ips: { pod: string; host: string },
): Promise<Record<string, string>> {
  const env: Record<string, string> = { ...base };
  await applyEnvFrom(env, pod.metadata.namespace ?? 'default', c, src);
  for (const v of c.env ?? []) {
    const value = await resolveOne(v, pod, c, src, ips);
    if (value !== undefined) env[v.name] = v.valueFrom ? value : expandVars(value, env);
  }
  return env;
}
