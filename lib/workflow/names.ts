/**
 * Deterministic names of the objects a WorkflowRun creates. Every name is a DNS-1123 subdomain
 * of at most 63 characters (so it is also a valid label value), derived only from stable
 * inputs, so a restarted controller computes the same names and AlreadyExists means "reuse".
 *
 * Form: `<prefix>-<10 hex>` where the hash is sha256 of a key naming the child. Without a matrix
 * combination and with a WorkflowRun name of at most 52 characters this is exactly the upstream
 * name (`<wfr>-<sha256("job/step/actionStep")[:10]>`, `<wfr>-<sha256(job)[:10]>`). When the
 * WorkflowRun name must be truncated, the full name is hashed in as well, so two WorkflowRuns
 * sharing a long prefix still get different child names. Matrix keys are hashed as a JSON
 * array (which cannot collide with the plain `job/step/actionStep` form: job names never
 * start with '[').
 */
import { createHash } from 'node:crypto';

export const MAX_NAME_LENGTH = 63;
const HASH_LENGTH = 10;

export const LABEL_WORKFLOWRUN_UID = 'kruntimes.io/workflowrun-uid';
export const LABEL_WORKFLOW_JOB = 'kruntimes.io/workflow-job';
export const LABEL_WORKFLOW_STEP = 'kruntimes.io/workflow-step';
export const LABEL_WORKFLOW_ACTION_STEP = 'kruntimes.io/workflow-action-step';
/** Matrix combination id of a child Run / child WorkflowRun (new in kruntimes-ts). */
export const LABEL_WORKFLOW_MATRIX = 'kruntimes.io/workflow-matrix';
export const ANNOTATION_WORKFLOW_OUTPUT_PREFIX = 'kruntimes.io/workflow-output.';
/** Comma-separated chain of reusable Workflows above a child WorkflowRun (new in kruntimes-ts). */
export const ANNOTATION_WORKFLOW_CALL_CHAIN = 'kruntimes.io/workflow-call-chain';

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

export const isDnsSubdomain = (s: string, max = 253): boolean => s.length <= max && DNS_SUBDOMAIN.test(s);
export const isDnsLabel = (s: string): boolean => s.length <= 63 && DNS_LABEL.test(s);
export const isLabelValue = (s: string): boolean => s.length <= 63 && LABEL_VALUE.test(s);

function sha10(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, HASH_LENGTH);
}

/**
 * Makes `s` usable as a name prefix: lowercase, characters outside [a-z0-9.-] become '-',
 * no empty or edge-dashed dot segments, at most `max` characters.
 */
export function namePrefix(s: string, max: number): string {
  const clean = s
    .toLowerCase()
    .replace(/[^a-z0-9.-]/g, '-')
    .split('.')
    .map((seg) => seg.replace(/^-+|-+$/g, ''))
    .filter((seg) => seg !== '')
    .join('.');
  return clean.slice(0, max).replace(/[-.]+$/, '');
}

/** `<prefix>-<sha10(key)>`, hashing the parent in too when it had to be cut or cleaned. */
function childName(parent: string, key: string, max = MAX_NAME_LENGTH): string {
  const room = max - HASH_LENGTH - 1;
  const prefix = namePrefix(parent, room);
  const exact = prefix === parent;
  const hash = sha10(exact ? key : `${parent}\u0000${key}`);
  return prefix ? `${prefix}-${hash}` : hash;
}

export interface StepRef {
  job: string;
  /** Matrix combination id (matrix jobs only). */
  combination?: string;
  /** Step name (unique within the job). */
  step: string;
  /** Action-internal step name (steps that use an Action). */
  actionStep?: string;
}

function stepKey(ref: StepRef): string {
  if (ref.combination === undefined) return `${ref.job}/${ref.step}/${ref.actionStep ?? ''}`;
  return JSON.stringify([ref.job, ref.combination, ref.step, ref.actionStep ?? '']);
}

/** Name of the child Run executing one step (or one Action-internal step). */
export function childRunName(workflowRunName: string, ref: StepRef): string {
  return childName(workflowRunName, stepKey(ref));
}

/** Name of the child WorkflowRun of a reusable-workflow (uses) job. */
export function childWorkflowRunName(workflowRunName: string, job: string, combination?: string): string {
  return childName(workflowRunName, combination === undefined ? job : JSON.stringify([job, combination]));
}

/** Name of the job-local PersistentWorkspace shared by the Runs of one job (or combination). */
export function jobWorkspaceName(workflowRunName: string, job: string, combination?: string): string {
  return childName(workflowRunName, JSON.stringify(['workspace', job, combination ?? '']));
}

/** ControllerRevision holding the execution snapshot: `<wfr>-snapshot-<sha10(uid)>`. */
export function snapshotName(workflowRunName: string, uid: string): string {
  return childName(`${workflowRunName}-snapshot`, uid);
}

/** Labels carried by a child Run. */
export function childRunLabels(workflowRunUid: string, ref: StepRef): Record<string, string> {
  return {
    [LABEL_WORKFLOWRUN_UID]: workflowRunUid,
    [LABEL_WORKFLOW_JOB]: ref.job,
    [LABEL_WORKFLOW_STEP]: ref.step,
    ...(ref.actionStep !== undefined ? { [LABEL_WORKFLOW_ACTION_STEP]: ref.actionStep } : {}),
    ...(ref.combination !== undefined ? { [LABEL_WORKFLOW_MATRIX]: ref.combination } : {}),
  };
}

/** Reads a child Run's identity back from its labels (undefined when it is not a workflow child). */
export function stepRefFromLabels(labels: Readonly<Record<string, string>> | undefined): StepRef | undefined {
  const job = labels?.[LABEL_WORKFLOW_JOB];
  const step = labels?.[LABEL_WORKFLOW_STEP];
  if (!job || !step) return undefined;
  const combination = labels[LABEL_WORKFLOW_MATRIX];
  const actionStep = labels[LABEL_WORKFLOW_ACTION_STEP];
  return { job, step, ...(combination ? { combination } : {}), ...(actionStep ? { actionStep } : {}) };
}
