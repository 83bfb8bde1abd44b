/**
 * Secret/ConfigMap references of a Job with Kubernetes optional semantics: a required reference
 * whose object or key is missing keeps the Job from being accepted; an optional one leaves the
 * variable unset. The OpenSandbox adapter also resolves values (it sends them over the API);
 * the Kubernetes adapter leaves resolution to the kubelet.
 */
import { R } from '../fn/resources.ts';
import type { ObjectRef, State } from '../fn/types.ts';
import { dataOf, type EnvVar, type Job, type KeyRef, type Secret } from './api.ts';
import type { Problem } from './resolve.ts';

export const usesSecretEnv = (job: Job): boolean => (job.spec.env ?? []).some((e) => !!e.valueFrom?.secretKeyRef);

const decode = (b64: string): string => Buffer.from(b64, 'base64').toString('utf8');

type Lookup = { value: string } | { missing: Problem } | { skip: true };

function lookup(kind: 'Secret' | 'ConfigMap', ref: KeyRef, ns: string, state: State, envName: string): Lookup {
  const obj = state.get(kind === 'Secret' ? R.secrets : R.configMaps, ns, ref.name);
  if (!obj)
    return ref.optional
      ? { skip: true }
      : { missing: { reason: `${kind}NotFound`, message: `env ${envName}: ${kind} ${ns}/${ref.name} does not exist` } };
  const raw = dataOf(obj)[ref.key];
  if (raw === undefined)
    return ref.optional
      ? { skip: true }
      : {
          missing: {
            reason: `${kind}KeyNotFound`,
            message: `env ${envName}: ${kind} ${ns}/${ref.name} has no key ${ref.key}`,
          },
        };
  return { value: kind === 'Secret' ? decode(raw) : raw };
}

function lookupVar(e: EnvVar, ns: string, state: State): Lookup {
  if (e.valueFrom?.secretKeyRef) return lookup('Secret', e.valueFrom.secretKeyRef, ns, state, e.name);
  if (e.valueFrom?.configMapKeyRef) return lookup('ConfigMap', e.valueFrom.configMapKeyRef, ns, state, e.name);
  return { value: e.value ?? '' };
}

/** Resolved env values (later entries win, as in Kubernetes), or the first required reference that is missing. */
export function resolveEnv(
  job: Job,
  state: State,
): { ok: true; env: Record<string, string> } | { ok: false; problem: Problem } {
  const ns = job.metadata.namespace ?? '';
  const env: Record<string, string> = {};
  for (const e of job.spec.env ?? []) {
    const r = lookupVar(e, ns, state);
    if ('missing' in r) return { ok: false, problem: r.missing };
    if ('value' in r) env[e.name] = r.value;
  }
  return { ok: true, env };
}

/** The first missing required reference (env or image pull Secret), or undefined. */
export function referenceProblem(job: Job, state: State): Problem | undefined {
  const r = resolveEnv(job, state);
  if (!r.ok) return r.problem;
  const pull = job.spec.imagePullSecret?.name;
  if (pull && !state.get(R.secrets, job.metadata.namespace, pull)) {
    return {
      reason: 'ImagePullSecretNotFound',
      message: `spec.imagePullSecret: Secret ${job.metadata.namespace ?? ''}/${pull} does not exist`,
    };
  }
  return undefined;
}

/** The ConfigMaps a Job's env names, for live reads (ConfigMaps are never cached either). */
export function jobConfigMapRefs(job: Job): ObjectRef[] {
  const namespace = job.metadata.namespace ?? '';
  const names = (job.spec.env ?? []).flatMap((e) =>
    e.valueFrom?.configMapKeyRef ? [e.valueFrom.configMapKeyRef.name] : [],
  );
  return [...new Set(names)].map((name) => ({ resource: R.configMaps, namespace, name }));
}

/** Everything a Job's env and image pull Secret read by name: its Secrets and ConfigMaps. */
export const jobValueRefs = (job: Job): ObjectRef[] => [...jobSecretRefs(job), ...jobConfigMapRefs(job)];

/** The Secrets a Job names (env secretKeyRefs and the image pull Secret), for live reads. */
export function jobSecretRefs(job: Job): ObjectRef[] {
  const namespace = job.metadata.namespace ?? '';
  const names = (job.spec.env ?? []).flatMap((e) => (e.valueFrom?.secretKeyRef ? [e.valueFrom.secretKeyRef.name] : []));
  if (job.spec.imagePullSecret?.name) names.push(job.spec.imagePullSecret.name);
  return [...new Set(names)].map((name) => ({ resource: R.secrets, namespace, name }));
}

/** The registry host of an image reference (Docker Hub for bare names). */
export function registryOf(image: string): string {
  const first = image.split('/')[0] ?? '';
  const hasRegistry = image.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost');
  return hasRegistry ? first : 'docker.io';
}

const DOCKER_HUB = new Set(['docker.io', 'index.docker.io', 'registry-1.docker.io']);
const normalizeRegistry = (key: string): string => {
  const host = key.replace(/^https?:\/\//, '').split('/')[0] ?? '';
  return DOCKER_HUB.has(host) ? 'docker.io' : host;
};

interface DockerAuth {
  username?: string;
  password?: string;
  auth?: string;
}

/** Username/password for the image's registry from a kubernetes.io/dockerconfigjson Secret. */
export function imageAuthFrom(
  secret: Secret,
  image: string,
): { ok: true; username: string; password: string } | { ok: false; problem: Problem } {
  const name = `${secret.metadata.namespace ?? ''}/${secret.metadata.name ?? ''}`;
  const raw = secret.data?.['.dockerconfigjson'];
  if (secret.type !== 'kubernetes.io/dockerconfigjson' || !raw)
    return {
      ok: false,
      problem: {
        reason: 'InvalidImagePullSecret',
        message: `Secret ${name} is not a kubernetes.io/dockerconfigjson Secret`,
      },
    };
  let auths: Record<string, DockerAuth> = {};
  try {
    auths = (JSON.parse(decode(raw)) as { auths?: Record<string, DockerAuth> }).auths ?? {};
  } catch {
    return {
      ok: false,
      problem: { reason: 'InvalidImagePullSecret', message: `Secret ${name}: .dockerconfigjson is not JSON` },
    };
  }
  const registry = registryOf(image);
  const entry = Object.entries(auths).find(([k]) => normalizeRegistry(k) === registry)?.[1];
  if (!entry)
    return {
      ok: false,
      problem: { reason: 'ImageAuthNotFound', message: `Secret ${name} has no credentials for registry ${registry}` },
    };
  if (entry.username !== undefined && entry.password !== undefined)
    return { ok: true, username: entry.username, password: entry.password };
  const [username = '', ...rest] = decode(entry.auth ?? '').split(':');
  if (!username || !rest.length)
    return {
      ok: false,
      problem: {
        reason: 'InvalidImagePullSecret',
        message: `Secret ${name}: the entry for ${registry} has no username/password`,
      },
    };
  return { ok: true, username, password: rest.join(':') };
}
