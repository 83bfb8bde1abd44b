/**
 * Builders of the expression contexts a WorkflowRun field may read. Every object built here is
 * closed (see expressions.closedObject): reading a step, job, output, input, matrix key or
 * env var that does not exist is an ExpressionError naming what does exist.
 *
 *   steps.<step>.{outcome, conclusion, outputs.<k>}  earlier steps of the same job (or Action)
 *   needs.<job>.{result, outputs.<k>, combinations.<id>.{result, outputs, matrix}}  direct needs
 *   jobs.<job>.{result, outputs.<k>}                 kruntimes upstream form (ancestors only)
 *   matrix.<key>, inputs.<name>, env.<NAME>
 */
import { closedObject, type ContextName } from './expressions.ts';
import type { CombinationStatus, ExecutionStatus, JobStatus, JsonValue, Result, StepStatus } from './types.ts';

type Ctx = Partial<Record<ContextName, JsonValue>>;

/** The GitHub result of a terminal job/combination (after continue-on-error); null while not terminal. */
export function executionResult(s: Pick<ExecutionStatus, 'phase' | 'conclusion'> | undefined): Result | null {
  if (!s) return null;
  if (s.conclusion) return s.conclusion;
  if (s.phase === 'Succeeded') return 'success';
  if (s.phase === 'Failed') return 'failure';
  if (s.phase === 'Skipped') return 'skipped';
  return null;
}

/**
 * Outputs are closed (a missing key is an error) once they are final, i.e. the job or step
 * succeeded; outputs of anything that did not succeed are open (missing keys read as null), so
 * `if: failure() && needs.a.outputs.x == ''` does not trip over outputs that cannot exist.
 */
function outputsObject(outputs: Record<string, string> | undefined, final: boolean): Record<string, JsonValue> {
  const o = { ...(outputs ?? {}) };
  return final ? closedObject(o, 'output') : o;
}

function combinationEntry(c: CombinationStatus): JsonValue {
  return closedObject(
    {
      result: executionResult(c),
      outputs: outputsObject(c.outputs, executionResult(c) === 'success'),
      matrix: closedObject({ ...c.matrix }, 'matrix key'),
    },
    'property',
  );
}

function jobEntry(status: JobStatus | undefined, withCombinations: boolean): JsonValue {
  const entry: Record<string, JsonValue> = {
    result: executionResult(status),
    outputs: outputsObject(status?.outputs, executionResult(status) === 'success'),
  };
  if (withCombinations && status?.combinations) {
    entry.combinations = closedObject(
      Object.fromEntries(status.combinations.map((c) => [c.id, combinationEntry(c)])),
      'matrix combination',
    );
  }
  return closedObject(entry, 'property');
}

/** `needs`: the direct dependencies of a job with their result and outputs. */
export function needsContext(needs: readonly string[], statuses: Readonly<Record<string, JobStatus>>): JsonValue {
  return closedObject(
    Object.fromEntries([...new Set(needs)].sort().map((n) => [n, jobEntry(statuses[n], true)])),
    'job',
  );
}

/** `jobs` (kruntimes upstream): outputs and results of the listed jobs (normally all ancestors). */
export function jobsContext(names: readonly string[], statuses: Readonly<Record<string, JobStatus>>): JsonValue {
  return closedObject(
    Object.fromEntries([...new Set(names)].sort().map((n) => [n, jobEntry(statuses[n], false)])),
    'job',
  );
}

/** `steps`: the steps before `index` that reached a result (skipped steps have no outputs). */
export function stepsContext(steps: readonly StepStatus[] | undefined, index: number): JsonValue {
  const entries: [string, JsonValue][] = [];
  for (const s of (steps ?? []).slice(0, Math.max(0, index))) {
    if (!s.conclusion && s.phase !== 'Succeeded' && s.phase !== 'Failed' && s.phase !== 'Skipped') continue;
    const conclusion = s.conclusion ?? stepPhaseResult(s.phase);
    entries.push([
      s.name,
      closedObject(
        { outcome: s.outcome ?? conclusion, conclusion, outputs: outputsObject(s.outputs, s.phase === 'Succeeded') },
        'property',
      ),
    ]);
  }
  return closedObject(Object.fromEntries(entries), 'step');
}

function stepPhaseResult(phase: StepStatus['phase']): Result {
  if (phase === 'Succeeded') return 'success';
  if (phase === 'Skipped') return 'skipped';
  return 'failure';
}

export function matrixContext(values: Readonly<Record<string, JsonValue>>): JsonValue {
  return closedObject({ ...values }, 'matrix key');
}

export function inputsContext(values: Readonly<Record<string, string>>): JsonValue {
  return closedObject({ ...values }, 'input');
}

export function envContext(values: Readonly<Record<string, string>> | undefined): JsonValue {
  return closedObject({ ...(values ?? {}) }, 'environment variable');
}

/** Drops undefined entries so absent contexts are reported as "not available here". */
export function contexts(parts: Partial<Record<ContextName, JsonValue | undefined>>): Ctx {
  const out: Ctx = {};
  for (const [k, v] of Object.entries(parts) as [ContextName, JsonValue | undefined][]) if (v !== undefined) out[k] = v;
  return out;
}
