/**
 * Job-to-job artifacts (seed 000): a run step imports `jobs.<job>.artifacts.<name>` from a
 * direct `needs` dependency; the controller resolves it to the producing job's latest successful
 * ArtifactRef of that name and materializes the generic Run.spec.artifactInputs. When every
 * dependency succeeded but the artifact does not exist, the step fails deterministically
 * instead of waiting.
 */
import { executionResult } from './context.ts';
import type {
  ArtifactImport,
  ArtifactInput,
  ArtifactRef,
  CombinationStatus,
  JobsSpec,
  JobStatus,
  StepSpec,
} from './types.ts';

export type ArtifactErrorCode =
  | 'invalid-source'
  | 'unknown-job'
  | 'not-a-need'
  | 'invalid-path'
  | 'duplicate-path'
  | 'not-a-run-step'
  | 'missing'
  | 'ambiguous'
  | 'producer-not-successful';

export class ArtifactError extends Error {
  constructor(
    readonly code: ArtifactErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'ArtifactError';
  }
}

export interface ArtifactSource {
  job: string;
  artifact: string;
}

const SOURCE = /^jobs\.(.+)$/;
const JOB_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
/** CRD pattern of an artifact destination: relative, no '..' segment. */
const DEST_PATH = /^([^/.][^/]*|[.]([^/.][^/]*)?|[.][.][^/]+)(\/([^/.][^/]*|[.]([^/.][^/]*)?|[.][.][^/]+)?)*$/;

/**
 * Parses `jobs.<job>.artifacts.<name>`. Job and artifact names may contain dots, so when the
 * text contains `.artifacts.` more than once the split whose job is in `knownJobs` wins (the
 * first split when knownJobs is not given, or when several are known).
 */
export function parseArtifactSource(from: string, knownJobs?: readonly string[]): ArtifactSource {
  const rest = SOURCE.exec(from)?.[1] ?? '';
  const candidates: ArtifactSource[] = [];
  for (let i = rest.indexOf('.artifacts.'); i >= 0; i = rest.indexOf('.artifacts.', i + 1)) {
    const job = rest.slice(0, i);
    const artifact = rest.slice(i + '.artifacts.'.length);
    if (JOB_NAME.test(job) && job.length <= 63 && artifact !== '' && !artifact.includes('/'))
      candidates.push({ job, artifact });
  }
  const known = knownJobs ? candidates.filter((c) => knownJobs.includes(c.job)) : [];
  const pick = known[0] ?? candidates[0];
  if (!pick)
    throw new ArtifactError(
      'invalid-source',
      `artifact source "${from}" must have the form jobs.<job>.artifacts.<name>`,
    );
  return pick;
}

/** Checks an artifact destination path (CRD rule: relative, no '..' segment, ≤4096). */
export function isValidArtifactPath(path: string): boolean {
  return path.length >= 1 && path.length <= 4096 && !path.includes('\u0000') && DEST_PATH.test(path);
}

function normalizePath(path: string): string {
  return (
    path
      .split('/')
      .filter((s) => s !== '' && s !== '.')
      .join('/') || '.'
  );
}

function where(job: string, step: string): string {
  return `step "${step}" in job "${job}"`;
}

/**
 * Static checks of one step's artifact imports: run steps only, well-formed source, the
 * producer is another job listed in this job's needs, valid and unique destination paths.
 */
export function validateStepArtifacts(jobs: JobsSpec, job: string, step: StepSpec): void {
  const imports = step.artifacts ?? [];
  if (imports.length === 0) return;
  if (step.uses !== undefined)
    throw new ArtifactError('not-a-run-step', `${where(job, step.name)}: artifacts can only be set on run steps`);
  const needs = jobs[job]?.needs ?? [];
  const seen = new Map<string, string>();
  for (const imp of imports) {
    const src = parseArtifactSource(imp.from, Object.keys(jobs));
    if (src.job === job) {
      throw new ArtifactError(
        'not-a-need',
        `${where(job, step.name)} imports artifact "${src.artifact}" from its own job; steps of one job share files through the job workspace`,
      );
    }
    if (!Object.hasOwn(jobs, src.job))
      throw new ArtifactError(
        'unknown-job',
        `${where(job, step.name)} imports artifact "${src.artifact}" from unknown job "${src.job}"`,
      );
    if (!needs.includes(src.job)) {
      throw new ArtifactError(
        'not-a-need',
        `${where(job, step.name)} imports artifact "${src.artifact}" from job "${src.job}", but "${src.job}" is not in the needs of job "${job}"`,
      );
    }
    if (!isValidArtifactPath(imp.path)) {
      throw new ArtifactError(
        'invalid-path',
        `${where(job, step.name)}: artifact destination ${JSON.stringify(imp.path)} must be a relative path without '..' segments`,
      );
    }
    const norm = normalizePath(imp.path);
    const prev = seen.get(norm);
    if (prev !== undefined)
      throw new ArtifactError(
        'duplicate-path',
        `${where(job, step.name)}: artifact destinations ${JSON.stringify(prev)} and ${JSON.stringify(imp.path)} are the same path`,
      );
    seen.set(norm, imp.path);
  }
}

/** validateStepArtifacts for every step of every job (sorted jobs, step order). */
export function validateArtifactImports(jobs: JobsSpec): void {
  for (const job of Object.keys(jobs).sort())
    for (const step of jobs[job]?.steps ?? []) validateStepArtifacts(jobs, job, step);
}

/** One child Run of a job in execution order, for the job's artifact map. */
export interface ProducedArtifacts {
  succeeded: boolean;
  artifactRefs?: readonly ArtifactRef[];
}

/**
 * The job's artifact map: for each name, the reference from the last successful child Run that
 * produced it (a later sequential step may deliberately replace an earlier artifact).
 */
export function collectArtifacts(runs: readonly ProducedArtifacts[]): Record<string, ArtifactRef> {
  const out: Record<string, ArtifactRef> = {};
  for (const r of runs) if (r.succeeded) for (const ref of r.artifactRefs ?? []) out[ref.name] = ref;
  return Object.fromEntries(
    Object.keys(out)
      .sort()
      .map((k) => [k, out[k] as ArtifactRef]),
  );
}

function fromCombinations(combinations: readonly CombinationStatus[], src: ArtifactSource): ArtifactRef | undefined {
  const holders = combinations.filter((c) => c.artifacts?.[src.artifact] !== undefined);
  if (holders.length > 1) {
    throw new ArtifactError(
      'ambiguous',
      `artifact "${src.artifact}" of job "${src.job}" was produced by several matrix combinations (${holders.map((c) => c.id).join(', ')}); give each combination's artifact a distinct name`,
    );
  }
  return holders[0]?.artifacts?.[src.artifact];
}

function availableNames(status: JobStatus): string {
  const names = new Set([
    ...Object.keys(status.artifacts ?? {}),
    ...(status.combinations ?? []).flatMap((c) => Object.keys(c.artifacts ?? {})),
  ]);
  return names.size ? [...names].sort().join(', ') : 'none';
}

export type ArtifactResolution =
  | { kind: 'resolved'; inputs: ArtifactInput[] }
  | { kind: 'wait'; message: string }
  | { kind: 'fail'; error: ArtifactError };

function resolveOne(
  imp: ArtifactImport,
  src: ArtifactSource,
  status: JobStatus | undefined,
): ArtifactInput | { wait: string } {
  const result = executionResult(status);
  if (!status || result === null)
    return { wait: `waiting for job "${src.job}" to finish before importing artifact "${src.artifact}"` };
  if (result !== 'success') {
    throw new ArtifactError(
      'producer-not-successful',
      `artifact "${src.artifact}" of job "${src.job}" is unavailable: job "${src.job}" did not succeed (result: ${result})`,
    );
  }
  const ref = status.combinations?.length
    ? fromCombinations(status.combinations, src)
    : status.artifacts?.[src.artifact];
  if (!ref) {
    throw new ArtifactError(
      'missing',
      `artifact "${src.artifact}" of job "${src.job}" does not exist: job "${src.job}" succeeded without producing it (produced: ${availableNames(status)})`,
    );
  }
  return { artifactRef: ref, path: imp.path };
}

/**
 * Resolves a step's imports against the producing jobs' statuses into Run.spec.artifactInputs
 * (in declaration order). Static problems and missing artifacts are failures; a producer that
 * is not terminal yet means wait.
 */
export function resolveStepArtifacts(
  jobs: JobsSpec,
  job: string,
  step: StepSpec,
  statuses: Readonly<Record<string, JobStatus>>,
): ArtifactResolution {
  try {
    validateStepArtifacts(jobs, job, step);
    const inputs: ArtifactInput[] = [];
    for (const imp of step.artifacts ?? []) {
      const src = parseArtifactSource(imp.from, Object.keys(jobs));
      const r = resolveOne(imp, src, statuses[src.job]);
      if ('wait' in r) return { kind: 'wait', message: r.wait };
      inputs.push(r);
    }
    return { kind: 'resolved', inputs };
  } catch (e) {
    if (e instanceof ArtifactError) return { kind: 'fail', error: e };
    throw e;
  }
}
