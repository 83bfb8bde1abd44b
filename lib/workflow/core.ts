/**
 * Pure cores of the WorkflowRun controller (no I/O, time injected). Entry point of this library
 * folder; it is not a function (there is deliberately no index.ts FunctionDef here).
 *
 *   expressions  `${{ }}` parser, printer, evaluator, templates, if: conditions, static checks
 *   context      builders of the steps/needs/jobs/matrix/inputs/env contexts
 *   dag          job graph validation, topological order, readiness (start / skip / cancel)
 *   matrix       strategy.matrix expansion, combination ids, per-combination outputs, fail-fast
 *   names        deterministic child names (≤63, DNS subdomain) and labels
 *   calls        reusable workflow calls: call graph, inputs, materialization, output contract
 *   artifacts    step artifact imports → Run.spec.artifactInputs
 *   steps        step sequencing with if / continue-on-error / timeout-minutes
 *   runs         child Run manifests for steps and Action steps
 *   status       initialize / reject / reconcile (status reducer + children to create/cancel)
 */
export * from './types.ts';
export * from './expressions.ts';
export { printLiteral, tokenize, SyntaxProblem } from './expr-parser.ts';
export * from './context.ts';
export * from './dag.ts';
export * from './matrix.ts';
export * from './names.ts';
export * from './calls.ts';
export * from './artifacts.ts';
export * from './steps.ts';
export * from './runs.ts';
export * from './status.ts';
export { projectRuns, callOutcome, runResult } from './status-project.ts';
export * from './validate.ts';
