/**
 * Data shapes of the workflow cores. They stay close to the generated CRD types
 * (lib/api/generated/kruntimes.ts) and only add optional fields that the CRD does not carry
 * yet (GitHub-style `if`, `strategy`, `continue-on-error`, `timeout-minutes`, step results,
 * timestamps, per-job conditions and matrix combinations). A CRD object therefore always
 * satisfies these input types; the status types are a superset of the CRD status.
 */
import type { Run, WorkflowRun } from '../api/generated/kruntimes.ts';
import type { Condition } from '../run/conditions.ts';

export type { Condition };

/** A JSON value as seen by expressions (matrix values, fromJSON results, outputs). */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

type CrdJobSpec = WorkflowRun['spec']['jobs'][string];
type CrdStepSpec = NonNullable<CrdJobSpec['steps']>[number];
type CrdJobStatus = NonNullable<NonNullable<WorkflowRun['status']>['jobs']>[string];
type CrdStepStatus = NonNullable<CrdJobStatus['steps']>[number];

/** Run.status.artifactRefs[] entry (also WorkflowRun status.jobs.<job>.artifacts.<name>). */
export type ArtifactRef = NonNullable<NonNullable<Run['status']>['artifactRefs']>[number];
/** Run.spec.artifactInputs[] entry. */
export type ArtifactInput = NonNullable<Run['spec']['artifactInputs']>[number];
export type ArtifactImport = NonNullable<CrdStepSpec['artifacts']>[number];
export type ActionStepStatus = NonNullable<CrdStepStatus['actionSteps']>[number];

/** A boolean field that may also be a `${{ }}` expression (e.g. `${{ matrix.experimental }}`). */
export type BoolOrExpr = boolean | string;
/** A number field that may also be a `${{ }}` expression. */
export type NumberOrExpr = number | string;

export interface StepSpec extends Omit<CrdStepSpec, 'if' | 'continue-on-error' | 'timeout-minutes'> {
  /** GitHub `if:`; `${{ }}` optional. Default `success()`. */
  if?: string;
  'continue-on-error'?: BoolOrExpr;
  'timeout-minutes'?: NumberOrExpr;
}

/**
 * strategy.matrix: every key except include/exclude is a list of values (or an expression
 * yielding one); include/exclude are lists of objects. The whole matrix may also be one
 * `${{ }}` expression yielding such an object.
 */
export type MatrixSpec = Record<string, JsonValue[] | string>;

export interface StrategySpec {
  matrix?: MatrixSpec | string;
  'fail-fast'?: BoolOrExpr;
  'max-parallel'?: NumberOrExpr;
}

export interface JobSpec extends Omit<
  CrdJobSpec,
  'steps' | 'if' | 'strategy' | 'continue-on-error' | 'timeout-minutes'
> {
  steps?: StepSpec[];
  /** GitHub `if:` evaluated when all needs are terminal. Default `success()`. */
  if?: string;
  strategy?: StrategySpec;
  'continue-on-error'?: BoolOrExpr;
  'timeout-minutes'?: NumberOrExpr;
}

export type JobsSpec = Record<string, JobSpec>;

/** Declared input of a Workflow or Action (the CRD enum only allows "string" today). */
export interface InputSpec {
  type?: 'string' | 'boolean' | 'number';
  required?: boolean;
  default?: string;
}

export interface WorkflowSpec {
  inputs?: Record<string, InputSpec>;
  outputs?: Record<string, { value: string }>;
  jobs: JobsSpec;
}

/** GitHub result vocabulary (`needs.<job>.result`, `steps.<id>.outcome/conclusion`). */
export type Result = 'success' | 'failure' | 'cancelled' | 'skipped';

/** CRD StepPhase plus Skipped (a step whose `if:` was false or that followed a failure). */
export type StepPhase = CrdStepStatus['phase'] | 'Skipped';
export type JobPhase = CrdJobStatus['phase'];
export type WorkflowRunPhase = NonNullable<WorkflowRun['status']>['phase'];

export interface StepStatus extends Omit<CrdStepStatus, 'phase'> {
  phase: StepPhase;
  /** Result before continue-on-error. */
  outcome?: Result;
  /** Result after continue-on-error (what later steps and the job see). */
  conclusion?: Result;
  startedAt?: string;
  finishedAt?: string;
  message?: string;
  /** Evaluated `continue-on-error` of the step, recorded when it starts. */
  continueOnError?: boolean;
}

/** Execution state shared by a plain job and one matrix combination of a job. */
export interface ExecutionStatus {
  phase: JobPhase;
  steps?: StepStatus[];
  outputs?: Record<string, string>;
  artifacts?: Record<string, ArtifactRef>;
  /** Result before job-level continue-on-error. */
  outcome?: Result;
  /** Result after continue-on-error; `needs.<job>.result`. */
  conclusion?: Result;
  startedAt?: string;
  finishedAt?: string;
  message?: string;
  /** Child WorkflowRun of a uses-job. */
  workflowRunName?: string;
  /** Evaluated job-level `continue-on-error`, recorded when the job (combination) starts. */
  continueOnError?: boolean;
  /** startedAt + timeout-minutes, recorded when the job (combination) starts. */
  deadline?: string;
  /**
   * Set when the job (combination) must stop early: its deadline passed (TimedOut → failure) or
   * a sibling combination failed under fail-fast (FailFast → cancelled). Pending steps are not
   * started and active children are cancelled.
   */
  stopped?: { reason: 'TimedOut' | 'FailFast'; message: string };
}

/** One matrix combination of a job; outputs are kept per combination (never last-wins). */
export interface CombinationStatus extends ExecutionStatus {
  /** Deterministic id (DNS-label-safe, see matrix.ts). */
  id: string;
  /** Display name, e.g. `build (18, linux)`. */
  name: string;
  index: number;
  matrix: Record<string, JsonValue>;
}

export interface JobStatus extends Omit<CrdJobStatus, 'phase' | 'steps'>, ExecutionStatus {
  phase: JobPhase;
  pre?: string[];
  conditions?: Condition[];
  /** Evaluated strategy of a matrix job, recorded when the job starts. */
  strategy?: { failFast: boolean; maxParallel?: number };
  /**
   * Matrix jobs only: every combination in index order. Job `outputs` then map each output name
   * to a JSON object {combinationId: value} (sorted by id) so no value is lost.
   */
  combinations?: CombinationStatus[];
}

export interface WorkflowRunStatus {
  phase: WorkflowRunPhase;
  jobs?: Record<string, JobStatus>;
  snapshotName?: string;
  message?: string;
  conditions?: Condition[];
}
