/**
 * Reusable workflow calls (`jobs.<job>.uses`): call-graph validation with cycle and depth
 * detection, input binding against the called Workflow's declared inputs, materialization of
 * `${{ inputs.* }}` into the called jobs, and the frozen output contract carried to the child
 * WorkflowRun as annotations.
 *
 * Messages follow upstream (internal/workflowtemplate): `workflow call cycle: A -> B -> A`,
 * `workflow call depth exceeds maximum 8: A -> ... -> I`, `unknown input "x"`,
 * `missing required input "x"`.
 */
import {
  collectReferences,
  evaluateExpression,
  ExpressionError,
  interpolate,
  parseTemplate,
  printExpression,
  toStringValue,
  usesStatusFunction,
  type ExpressionContext,
  type ExprNode,
} from './expressions.ts';
import { printLiteral } from './expr-parser.ts';
import { contexts, executionResult, inputsContext, jobsContext } from './context.ts';
import {
  ANNOTATION_WORKFLOW_CALL_CHAIN,
  ANNOTATION_WORKFLOW_OUTPUT_PREFIX,
  childWorkflowRunName,
  LABEL_WORKFLOW_JOB,
  LABEL_WORKFLOW_MATRIX,
  LABEL_WORKFLOWRUN_UID,
} from './names.ts';
import type { InputSpec, JobsSpec, JobStatus, WorkflowSpec } from './types.ts';

export const MAX_CALL_DEPTH = 8;
/** Upper bound of Σ(annotation key + value) of an output contract (upstream: 240 KiB). */
export const MAX_OUTPUT_CONTRACT_BYTES = 240 * 1024;

export type CallErrorCode = 'cycle' | 'depth' | 'missing-workflow' | 'input' | 'output-contract' | 'invalid-job';

export class CallError extends Error {
  constructor(
    readonly code: CallErrorCode,
    message: string,
    readonly chain: readonly string[] = [],
  ) {
    super(message);
    this.name = 'CallError';
  }
}

/** Sorted, de-duplicated names of the Workflows called by jobs with `uses`. */
export function calledWorkflows(spec: Pick<WorkflowSpec, 'jobs'>): string[] {
  return [...new Set(Object.values(spec.jobs).flatMap((j) => (j.uses ? [j.uses] : [])))].sort();
}

export type WorkflowLookup = (name: string) => WorkflowSpec | undefined;

/**
 * Validates the call graph rooted at `root`: every reachable Workflow exists, there is no cycle
 * and nesting stays within MAX_CALL_DEPTH. `callers` is the chain of Workflows already being
 * executed above this call (outermost first; empty for a WorkflowRun created directly), so a
 * nested child that would re-enter one of its callers is rejected too. Callees are visited in
 * sorted order, so errors are deterministic.
 */
export function validateCallGraph(root: string, lookup: WorkflowLookup, callers: readonly string[] = []): void {
  const done = new Set<string>();
  const stack = [...callers];
  const visit = (name: string): void => {
    if (stack.includes(name)) {
      const cycle = [...stack.slice(stack.indexOf(name)), name];
      throw new CallError('cycle', `workflow call cycle: ${cycle.join(' -> ')}`, cycle);
    }
    if (done.has(name)) return;
    if (stack.length >= MAX_CALL_DEPTH) {
      const path = [...stack, name];
      throw new CallError('depth', `workflow call depth exceeds maximum ${MAX_CALL_DEPTH}: ${path.join(' -> ')}`, path);
    }
    const spec = lookup(name);
    if (!spec) {
      const path = [...stack, name];
      throw new CallError(
        'missing-workflow',
        `reusable workflow "${name}" does not exist (call chain: ${path.join(' -> ')})`,
        path,
      );
    }
    stack.push(name);
    for (const callee of calledWorkflows(spec)) visit(callee);
    stack.pop();
    done.add(name);
  };
  visit(root);
}

/** Every Workflow name reachable from `root` (for preloading before validateCallGraph). */
export function reachableWorkflows(root: string, lookup: WorkflowLookup): string[] {
  const seen = new Set<string>();
  const todo = [root];
  for (let name = todo.pop(); name !== undefined; name = todo.pop()) {
    if (seen.has(name)) continue;
    seen.add(name);
    const spec = lookup(name);
    if (spec) todo.push(...calledWorkflows(spec));
  }
  return [...seen].sort();
}

function checkType(name: string, spec: InputSpec, value: string, what: string): void {
  const type = spec.type ?? 'string';
  if (type === 'boolean' && value !== 'true' && value !== 'false') {
    throw new CallError(
      'input',
      `${what} "${name}" must be a boolean ("true" or "false"), got ${JSON.stringify(value)}`,
    );
  }
  if (type === 'number' && (value.trim() === '' || !Number.isFinite(Number(value)))) {
    throw new CallError('input', `${what} "${name}" must be a number, got ${JSON.stringify(value)}`);
  }
}

/**
 * Binds call values to declared inputs: unknown values are rejected, a missing value takes the
 * default, a required input without value or default is an error, and values (and defaults)
 * must match the declared type (string; boolean and number are accepted for forward
 * compatibility, the CRD enum only allows string today). An explicitly passed empty string
 * satisfies `required`, as upstream.
 */
export function bindInputs(
  declared: Readonly<Record<string, InputSpec>> | undefined,
  values: Readonly<Record<string, string>> | undefined,
): Record<string, string> {
  const decl = declared ?? {};
  for (const name of Object.keys(values ?? {}).sort()) {
    if (!Object.hasOwn(decl, name)) throw new CallError('input', `unknown input "${name}"`);
  }
  const out: Record<string, string> = {};
  for (const name of Object.keys(decl).sort()) {
    const spec = decl[name] ?? {};
    const given = values && Object.hasOwn(values, name) ? values[name] : undefined;
    if (spec.default !== undefined && spec.default !== '') checkType(name, spec, spec.default, 'default of input');
    const value = given ?? spec.default ?? '';
    if (given === undefined && spec.required && (spec.default ?? '') === '')
      throw new CallError('input', `missing required input "${name}"`);
    if (given !== undefined) checkType(name, spec, given, 'input');
    out[name] = value;
  }
  return out;
}

/** Evaluates a uses-job's `with` values (sorted keys) in the caller's context. */
export function resolveWith(
  job: string,
  withValues: Readonly<Record<string, string>> | undefined,
  ctx: ExpressionContext,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of Object.keys(withValues ?? {}).sort())
    out[k] = interpolate(withValues?.[k] ?? '', ctx, `jobs.${job}.with.${k}`);
  return out;
}

// ---------------------------------------------------------------------------------------
// Materialization: bind ${{ inputs.* }} into the called jobs

function lookupInput(inputs: Readonly<Record<string, string>>, name: string): string | undefined {
  if (Object.hasOwn(inputs, name)) return inputs[name];
  const matches = Object.keys(inputs).filter((k) => k.toLowerCase() === name.toLowerCase());
  return matches.length === 1 ? inputs[matches[0] ?? ''] : undefined;
}

function inputsError(field: string, source: string, detail: string): ExpressionError {
  return new ExpressionError({ code: 'unknown-property', detail, expression: source, field, position: 0, offset: 0 });
}

/** Replaces literal `inputs.<name>` reads by string literals; any other read of inputs is an error. */
function substituteInputs(
  n: ExprNode,
  inputs: Readonly<Record<string, string>>,
  where: { field: string; source: string },
): ExprNode {
  const isInputs = (o: ExprNode): boolean => o.kind === 'context' && o.name.toLowerCase() === 'inputs';
  const keyOf = (x: ExprNode): string | undefined => {
    if (x.kind === 'property' && isInputs(x.object)) return x.name;
    if (x.kind === 'index' && isInputs(x.object) && x.index.kind === 'literal' && typeof x.index.value === 'string')
      return x.index.value;
    return undefined;
  };
  const key = keyOf(n);
  if (key !== undefined) {
    const value = lookupInput(inputs, key);
    const known = Object.keys(inputs).sort().join(', ') || 'none';
    if (value === undefined)
      throw inputsError(where.field, where.source, `unknown input "${key}" (declared: ${known})`);
    return { kind: 'literal', value, pos: n.pos };
  }
  if (isInputs(n))
    throw inputsError(where.field, where.source, 'inputs may only be read as inputs.<name> with a literal name');
  const sub = (c: ExprNode): ExprNode => substituteInputs(c, inputs, where);
  switch (n.kind) {
    case 'property':
      return { ...n, object: sub(n.object) };
    case 'index':
      return { ...n, object: sub(n.object), index: sub(n.index) };
    case 'not':
      return { ...n, operand: sub(n.operand) };
    case 'binary':
      return { ...n, left: sub(n.left), right: sub(n.right) };
    case 'call':
      return { ...n, args: n.args.map(sub) };
    default:
      return n;
  }
}

/**
 * Renders one field: expressions that read only inputs and yield a scalar become its string
 * value (wrapped as `${{ '<literal>' }}` when the value itself contains `${{`, so it is never
 * re-evaluated as an expression); every other expression keeps its form with each
 * `inputs.<name>` replaced by a literal, to be evaluated (typed) later by the child WorkflowRun.
 */
export function renderInputs(
  text: string,
  inputs: Readonly<Record<string, string>>,
  field: string,
  keepExpressions = false,
): string {
  if (!text.includes('${{')) return text;
  let out = '';
  const ctx: ExpressionContext = { contexts: contexts({ inputs: inputsContext(inputs) }) };
  for (const seg of parseTemplate(text, field)) {
    if (seg.kind === 'text') {
      out += seg.text;
      continue;
    }
    const refs = collectReferences(seg.ast);
    if (!refs.some((r) => r.context === 'inputs')) {
      out += `\${{ ${seg.source} }}`;
      continue;
    }
    const substituted = printExpression(substituteInputs(seg.ast, inputs, { field, source: seg.source }));
    if (!keepExpressions && refs.every((r) => r.context === 'inputs') && !usesStatusFunction(seg.ast)) {
      const value = toStringValue(evaluateExpression(substituted, ctx, field));
      if (value !== undefined) {
        out += value.includes('${{') ? `\${{ ${printLiteral(value)} }}` : value;
        continue;
      }
    }
    out += `\${{ ${substituted} }}`;
  }
  return out;
}

/**
 * `if:` values are expressions even without `${{ }}`: inputs are substituted as literals and the
 * expression form is kept (a rendered scalar such as `prod` would otherwise read as a context).
 */
export function renderCondition(text: string, inputs: Readonly<Record<string, string>>, field: string): string {
  if (text.includes('${{')) return renderInputs(text, inputs, field, true);
  if (text.trim() === '') return text;
  const ast = parseTemplate(`\${{ ${text} }}`, field)[0];
  if (ast?.kind !== 'expr' || !collectReferences(ast.ast).some((r) => r.context === 'inputs')) return text;
  return printExpression(substituteInputs(ast.ast, inputs, { field, source: ast.source }));
}

function renderDeep(v: unknown, inputs: Readonly<Record<string, string>>, field: string, key?: string): unknown {
  if (typeof v === 'string') return key === 'if' ? renderCondition(v, inputs, field) : renderInputs(v, inputs, field);
  if (Array.isArray(v)) return v.map((e, i) => renderDeep(e, inputs, `${field}[${i}]`));
  if (v !== null && typeof v === 'object') {
    return Object.fromEntries(
      Object.entries(v).map(([k, e]) => [
        k,
        renderDeep(e, inputs, /^[A-Za-z0-9_-]+$/.test(k) ? `${field}.${k}` : `${field}[${JSON.stringify(k)}]`, k),
      ]),
    );
  }
  return v;
}

/**
 * Binds `values` to the Workflow's inputs and renders them into a copy of its jobs (every
 * string field, including if, strategy and step fields). Other expressions are left for the
 * child WorkflowRun's controller.
 */
export function materializeCall(
  spec: WorkflowSpec,
  values: Readonly<Record<string, string>> | undefined,
): { inputs: Record<string, string>; jobs: JobsSpec } {
  const inputs = bindInputs(spec.inputs, values);
  const jobs: JobsSpec = {};
  for (const name of Object.keys(spec.jobs).sort())
    jobs[name] = renderDeep(spec.jobs[name], inputs, `jobs.${name}`) as JobsSpec[string];
  return { inputs, jobs };
}

// ---------------------------------------------------------------------------------------
// Output contract

const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

/** Annotations freezing a called Workflow's output expressions on its child WorkflowRun. */
export function outputContractAnnotations(outputs: WorkflowSpec['outputs']): Record<string, string> {
  const out: Record<string, string> = {};
  let bytes = 0;
  for (const name of Object.keys(outputs ?? {}).sort()) {
    if (name.length > 63 || !QUALIFIED_NAME.test(name))
      throw new CallError('output-contract', `output name "${name}" cannot be represented as a WorkflowRun annotation`);
    const key = `${ANNOTATION_WORKFLOW_OUTPUT_PREFIX}${name}`;
    const value = outputs?.[name]?.value ?? '';
    out[key] = value;
    bytes += Buffer.byteLength(key) + Buffer.byteLength(value);
  }
  if (bytes > MAX_OUTPUT_CONTRACT_BYTES) {
    throw new CallError(
      'output-contract',
      `output contract is ${bytes} bytes, exceeds ${MAX_OUTPUT_CONTRACT_BYTES} byte annotation limit`,
    );
  }
  return out;
}

/** The output expressions back from a child WorkflowRun's annotations. */
export function outputContractFromAnnotations(
  annotations: Readonly<Record<string, string>> | undefined,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(annotations ?? {})) {
    if (!key.startsWith(ANNOTATION_WORKFLOW_OUTPUT_PREFIX)) continue;
    const name = key.slice(ANNOTATION_WORKFLOW_OUTPUT_PREFIX.length);
    if (!QUALIFIED_NAME.test(name))
      throw new CallError('output-contract', `invalid workflow output annotation "${key}"`);
    out[name] = value;
  }
  return out;
}

/**
 * Evaluates a called Workflow's outputs against its child WorkflowRun's jobs (`jobs.<job>.outputs`
 * of every child job). Only succeeded jobs carry outputs.
 */
export function resolveCallOutputs(
  contract: Readonly<Record<string, string>>,
  childJobs: Readonly<Record<string, JobStatus>>,
): Record<string, string> {
  const succeeded = Object.fromEntries(Object.entries(childJobs).filter(([, s]) => executionResult(s) === 'success'));
  const ctx: ExpressionContext = { contexts: contexts({ jobs: jobsContext(Object.keys(succeeded), succeeded) }) };
  const out: Record<string, string> = {};
  for (const name of Object.keys(contract).sort())
    out[name] = interpolate(contract[name] ?? '', ctx, `outputs.${name}.value`);
  return out;
}

// ---------------------------------------------------------------------------------------
// The child WorkflowRun of a uses-job

export interface CallRequest {
  workflowRun: { name: string; uid: string };
  job: string;
  jobSpec: { uses?: string; with?: Record<string, string> };
  combination?: string;
  /** Context for `with` expressions (needs, jobs, matrix). */
  ctx: ExpressionContext;
  lookup: WorkflowLookup;
  /** Reusable Workflows above this WorkflowRun (from its call-chain annotation), outermost first. */
  callers?: readonly string[];
}

export interface ChildWorkflowRunManifest {
  name: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  spec: { jobs: JobsSpec };
}

export type CallPlan = { kind: 'create'; workflowRun: ChildWorkflowRunManifest } | { kind: 'fail'; message: string };

/** Parses the call-chain annotation of a WorkflowRun (empty when absent). */
export function callChain(annotations: Readonly<Record<string, string>> | undefined): string[] {
  const v = annotations?.[ANNOTATION_WORKFLOW_CALL_CHAIN];
  return v ? v.split(',').filter((s) => s !== '') : [];
}

const failure = (message: string): CallPlan => ({ kind: 'fail', message });
const messageOf = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/**
 * Plans the child WorkflowRun of a uses-job with upstream's messages: missing Workflow,
 * call-graph validation, `with` resolution, materialization and output contract failures fail
 * only this job (no retry).
 */
export function buildCallWorkflowRun(req: CallRequest): CallPlan {
  const uses = req.jobSpec.uses ?? '';
  const spec = req.lookup(uses);
  if (!spec) return failure(`reusable workflow "${uses}" for job "${req.job}" does not exist`);
  try {
    validateCallGraph(uses, req.lookup, req.callers ?? []);
  } catch (e) {
    return failure(`validate reusable workflow "${uses}" for job "${req.job}": ${messageOf(e)}`);
  }
  let values: Record<string, string>;
  try {
    values = resolveWith(req.job, req.jobSpec.with, req.ctx);
  } catch (e) {
    return failure(`resolve inputs for job "${req.job}": ${messageOf(e)}`);
  }
  let jobs: JobsSpec;
  try {
    ({ jobs } = materializeCall(spec, values));
  } catch (e) {
    return failure(`materialize reusable workflow "${uses}" for job "${req.job}": ${messageOf(e)}`);
  }
  let contract: Record<string, string>;
  try {
    contract = outputContractAnnotations(spec.outputs);
  } catch (e) {
    return failure(`materialize output contract for reusable workflow "${uses}" and job "${req.job}": ${messageOf(e)}`);
  }
  const labels: Record<string, string> = {
    [LABEL_WORKFLOWRUN_UID]: req.workflowRun.uid,
    [LABEL_WORKFLOW_JOB]: req.job,
  };
  if (req.combination !== undefined) labels[LABEL_WORKFLOW_MATRIX] = req.combination;
  return {
    kind: 'create',
    workflowRun: {
      name: childWorkflowRunName(req.workflowRun.name, req.job, req.combination),
      labels,
      annotations: { ...contract, [ANNOTATION_WORKFLOW_CALL_CHAIN]: [...(req.callers ?? []), uses].join(',') },
      spec: { jobs },
    },
  };
}
