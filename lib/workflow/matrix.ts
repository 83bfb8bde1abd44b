/**
 * strategy.matrix expansion with GitHub semantics, deterministic combination ids and names,
 * the per-combination output map, and fail-fast / max-parallel scheduling of combinations.
 *
 * Expansion: the keys other than include/exclude (sorted, because the API server does not keep
 * map key order) form a cartesian product, first key outermost. `exclude` entries remove every
 * combination whose values match all of the entry's keys (partial match, deep equality).
 * `include` entries are then applied in order: an entry is merged into every product
 * combination whose ORIGINAL values agree with the entry's original keys (values added by an
 * earlier include may be overwritten); an entry that matches no product combination becomes a
 * combination of its own (and is not a merge target for later entries).
 */
import { createHash } from 'node:crypto';
import { evaluateTemplate, hasExpression, type ExpressionContext } from './expressions.ts';
import { toStringValue } from './expr-values.ts';
import type { CombinationStatus, JsonValue, Result, StrategySpec } from './types.ts';

export const MAX_MATRIX_COMBINATIONS = 256;
/** Bound of the raw cartesian product before exclude (protects against explosive specs). */
export const MAX_MATRIX_PRODUCT = 4096;
const MAX_ID_SLUG = 40;

export class MatrixError extends Error {
  constructor(
    readonly job: string,
    message: string,
  ) {
    super(message);
    this.name = 'MatrixError';
  }
}

export interface MatrixCombination {
  index: number;
  /** DNS-label-safe id, unique within the job, e.g. `18-linux`. */
  id: string;
  /** Display name, e.g. `build (18, linux)`. */
  name: string;
  values: Record<string, JsonValue>;
}

type Obj = Record<string, JsonValue>;

const isObj = (v: JsonValue | undefined): v is Obj =>
  v !== null && v !== undefined && typeof v === 'object' && !Array.isArray(v);

/** Canonical JSON: object keys sorted at every level. */
export function canonicalJson(v: JsonValue): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (isObj(v))
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(v[k] ?? null)}`)
      .join(',')}}`;
  return JSON.stringify(v);
}

const deepEqual = (a: JsonValue | undefined, b: JsonValue | undefined): boolean =>
  canonicalJson(a ?? null) === canonicalJson(b ?? null);

/** Evaluates every string containing `${{ }}` (at any depth) as a typed template value. */
export function evaluateDeep(v: JsonValue, ctx: ExpressionContext, field: string): JsonValue {
  if (typeof v === 'string') return hasExpression(v) ? evaluateTemplate(v, ctx, field) : v;
  if (Array.isArray(v)) return v.map((e, i) => evaluateDeep(e, ctx, `${field}[${i}]`));
  if (isObj(v))
    return Object.fromEntries(Object.entries(v).map(([k, e]) => [k, evaluateDeep(e, ctx, `${field}.${k}`)]));
  return v;
}

function entryList(job: string, matrix: Obj, key: 'include' | 'exclude'): Obj[] {
  const v = matrix[key];
  if (v === undefined) return [];
  if (!Array.isArray(v)) throw new MatrixError(job, `matrix ${key} of job "${job}" must be a list of objects`);
  return v.map((e, i) => {
    if (!isObj(e) || Object.keys(e).length === 0)
      throw new MatrixError(job, `matrix ${key}[${i}] of job "${job}" must be a non-empty object`);
    return e;
  });
}

interface Vectors {
  keys: string[];
  vectors: JsonValue[][];
  include: Obj[];
  exclude: Obj[];
}

function vectorsOf(job: string, matrix: JsonValue): Vectors {
  if (!isObj(matrix)) throw new MatrixError(job, `matrix of job "${job}" must be an object`);
  const keys = Object.keys(matrix)
    .filter((k) => k !== 'include' && k !== 'exclude')
    .sort();
  const vectors = keys.map((k) => {
    const v = matrix[k];
    if (!Array.isArray(v)) throw new MatrixError(job, `matrix key "${k}" of job "${job}" must be a list of values`);
    if (v.length === 0) throw new MatrixError(job, `matrix key "${k}" of job "${job}" has no values`);
    return v;
  });
  const exclude = entryList(job, matrix, 'exclude');
  for (const [i, e] of exclude.entries()) {
    const unknown = Object.keys(e).filter((k) => !keys.includes(k));
    if (unknown.length)
      throw new MatrixError(
        job,
        `matrix exclude[${i}] of job "${job}" uses key(s) ${unknown.map((k) => `"${k}"`).join(', ')} that are not matrix keys`,
      );
  }
  return { keys, vectors, include: entryList(job, matrix, 'include'), exclude };
}

function product(keys: string[], vectors: JsonValue[][]): Obj[] {
  let out: Obj[] = keys.length ? [{}] : [];
  keys.forEach((k, i) => {
    out = out.flatMap((c) => (vectors[i] ?? []).map((v) => ({ ...c, [k]: v })));
  });
  return out;
}

function sortKeys(o: Obj): Obj {
  return Object.fromEntries(
    Object.keys(o)
      .sort()
      .map((k) => [k, o[k] ?? null]),
  );
}

/** The combinations' values, in order (see the module comment for the algorithm). */
export function matrixValues(job: string, matrix: JsonValue): Obj[] {
  const { keys, vectors, include, exclude } = vectorsOf(job, matrix);
  const size = vectors.reduce((n, v) => n * v.length, keys.length ? 1 : 0);
  if (size > MAX_MATRIX_PRODUCT) {
    throw new MatrixError(
      job,
      `matrix of job "${job}" has ${size} combinations before exclude, more than the maximum of ${MAX_MATRIX_PRODUCT}`,
    );
  }
  const base = product(keys, vectors).filter(
    (c) => !exclude.some((e) => Object.keys(e).every((k) => deepEqual(c[k], e[k]))),
  );
  const added: Obj[] = base.map(() => ({}));
  const extra: Obj[] = [];
  for (const entry of include) {
    const original = Object.keys(entry).filter((k) => keys.includes(k));
    let matched = false;
    base.forEach((c, i) => {
      if (!original.every((k) => deepEqual(c[k], entry[k]))) return;
      matched = true;
      const extraKeys = Object.fromEntries(Object.entries(entry).filter(([k]) => !keys.includes(k)));
      added[i] = { ...added[i], ...extraKeys };
    });
    if (!matched) extra.push(entry);
  }
  return [...base.map((c, i) => sortKeys({ ...added[i], ...c })), ...extra.map(sortKeys)];
}

function valueText(v: JsonValue): string {
  return toStringValue(v) ?? canonicalJson(v);
}

function slug(values: Obj): string {
  const s = Object.keys(values)
    .sort()
    .map((k) => valueText(values[k] ?? null))
    .join('-')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
  const cut = s.slice(0, MAX_ID_SLUG).replace(/-+$/, '');
  return cut || 'combination';
}

function shortHash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 8);
}

/**
 * Expands an already evaluated matrix. Ids are the slug of the values in key order
 * (`{node: 18, os: linux}` → `18-linux`); when two combinations share a slug, each of them gets
 * an 8-hex suffix hashed from its index and values, so ids stay unique and stable.
 */
export function expandMatrix(job: string, matrix: JsonValue): MatrixCombination[] {
  const values = matrixValues(job, matrix);
  if (values.length === 0) throw new MatrixError(job, `matrix of job "${job}" produces no combinations`);
  if (values.length > MAX_MATRIX_COMBINATIONS) {
    throw new MatrixError(
      job,
      `matrix of job "${job}" expands to ${values.length} combinations, more than the maximum of ${MAX_MATRIX_COMBINATIONS}`,
    );
  }
  const slugs = values.map(slug);
  const count = new Map<string, number>();
  for (const s of slugs) count.set(s, (count.get(s) ?? 0) + 1);
  return values.map((v, index) => {
    const base = slugs[index] ?? 'combination';
    const id = (count.get(base) ?? 0) > 1 ? `${base}-${shortHash(`${index}\u0000${canonicalJson(v)}`)}` : base;
    const name = `${job} (${Object.keys(v)
      .sort()
      .map((k) => valueText(v[k] ?? null))
      .join(', ')})`;
    return { index, id, name, values: v };
  });
}

export interface ResolvedStrategy {
  combinations: MatrixCombination[];
  failFast: boolean;
  maxParallel?: number;
}

function boolField(
  v: boolean | string | undefined,
  ctx: ExpressionContext,
  field: string,
  job: string,
  dflt: boolean,
): boolean {
  if (v === undefined) return dflt;
  const r = typeof v === 'string' ? evaluateTemplate(v, ctx, field) : v;
  if (r === true || r === 'true') return true;
  if (r === false || r === 'false') return false;
  throw new MatrixError(job, `${field} must be a boolean, got ${JSON.stringify(r)}`);
}

/**
 * Evaluates and expands a job's strategy (expressions may use the contexts in `ctx`, typically
 * needs and jobs). A job without strategy.matrix yields undefined.
 */
export function resolveStrategy(
  job: string,
  strategy: StrategySpec | undefined,
  ctx: ExpressionContext,
): ResolvedStrategy | undefined {
  if (strategy?.matrix === undefined) return undefined;
  const field = `jobs.${job}.strategy`;
  const matrix = evaluateDeep(strategy.matrix, ctx, `${field}.matrix`);
  const failFast = boolField(strategy['fail-fast'], ctx, `${field}.fail-fast`, job, true);
  const mp = strategy['max-parallel'];
  const maxParallel =
    mp === undefined
      ? undefined
      : typeof mp === 'string'
        ? Number(evaluateTemplate(mp, ctx, `${field}.max-parallel`))
        : mp;
  if (maxParallel !== undefined && (!Number.isInteger(maxParallel) || maxParallel < 1)) {
    throw new MatrixError(job, `${field}.max-parallel must be a positive integer, got ${String(maxParallel)}`);
  }
  return { combinations: expandMatrix(job, matrix), failFast, ...(maxParallel !== undefined ? { maxParallel } : {}) };
}

/**
 * Job-level outputs of a matrix job: for every output name, a JSON object mapping each
 * combination id (sorted) that produced it to its value. Nothing is dropped or overwritten.
 */
export function combinedOutputs(
  combinations: readonly Pick<CombinationStatus, 'id' | 'outputs'>[],
): Record<string, string> {
  const byKey = new Map<string, Record<string, string>>();
  for (const c of [...combinations].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))) {
    for (const [k, v] of Object.entries(c.outputs ?? {})) byKey.set(k, { ...(byKey.get(k) ?? {}), [c.id]: v });
  }
  return Object.fromEntries([...byKey.keys()].sort().map((k) => [k, JSON.stringify(byKey.get(k))]));
}

/** Job result from its combinations: any failure → failure, else any cancelled → cancelled, all skipped → skipped. */
export function combinedResult(results: readonly (Result | null)[]): Result | null {
  if (results.some((r) => r === null)) return null;
  if (results.some((r) => r === 'failure')) return 'failure';
  if (results.some((r) => r === 'cancelled')) return 'cancelled';
  if (results.length > 0 && results.every((r) => r === 'skipped')) return 'skipped';
  return 'success';
}

export interface CombinationSchedule {
  /** Pending combinations to start now (index order, within max-parallel). */
  start: string[];
  /** Running combinations to cancel (fail-fast after a failure). */
  cancel: string[];
  /** Pending combinations that will never start (fail-fast after a failure). */
  abandon: string[];
}

/**
 * fail-fast: once a combination concludes `failure` (continue-on-error combinations conclude
 * success and do not trigger it), running combinations are cancelled and pending ones abandoned.
 * max-parallel bounds how many combinations run at once.
 */
export function scheduleCombinations(
  combinations: readonly Pick<CombinationStatus, 'id' | 'index' | 'phase' | 'conclusion'>[],
  strategy: Pick<ResolvedStrategy, 'failFast' | 'maxParallel'>,
): CombinationSchedule {
  const ordered = [...combinations].sort((a, b) => a.index - b.index);
  const pending = ordered
    .filter((c) => (c.phase === 'Pending' || c.phase === 'Waiting') && c.conclusion === undefined)
    .map((c) => c.id);
  const running = ordered.filter((c) => c.phase === 'Running' && c.conclusion === undefined).map((c) => c.id);
  const failed = ordered.some(
    (c) => c.conclusion === 'failure' || (c.conclusion === undefined && c.phase === 'Failed'),
  );
  if (strategy.failFast && failed) return { start: [], cancel: running, abandon: pending };
  const slots = Math.max(0, (strategy.maxParallel ?? Infinity) - running.length);
  return { start: pending.slice(0, slots), cancel: [], abandon: [] };
}
