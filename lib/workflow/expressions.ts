/**
 * `${{ }}` expressions: templates (strings holding any number of `${{ }}`), `if:` conditions
 * and bare expressions, evaluated against explicitly provided contexts. Nothing is evaluated
 * loosely: a syntax error, an unknown or unavailable context, an unknown function, a wrong
 * argument count, a missing key of a closed context object (a step, job, input, matrix key or
 * env var that does not exist), or an object interpolated into a string all raise a typed
 * ExpressionError carrying the expression text, the field path, and the position.
 *
 * Semantics follow GitHub Actions: `&&`/`||` short-circuit and return an operand; falsy values
 * are false, 0, -0, NaN, '' and null; `==` compares strings case-insensitively and coerces
 * mixed kinds to numbers; property lookup is case-insensitive when the exact key is absent;
 * property access on null yields null; an `if:` without a status function is implicitly
 * `success() && (<expr>)`.
 */
import { parseExpression, printExpression, SyntaxProblem, type ExprNode } from './expr-parser.ts';
import {
  applyComparison,
  FormatProblem,
  formatString,
  kindOf,
  looseEquals,
  toJsonText,
  toStringValue,
  truthy,
} from './expr-values.ts';
import type { JsonValue } from './types.ts';

export { parseExpression, printExpression, isDotName, type ExprNode, type BinaryOp } from './expr-parser.ts';
export { truthy, looseEquals, compareValues, toNumber, toStringValue, formatString } from './expr-values.ts';

export const CONTEXT_NAMES = ['env', 'inputs', 'jobs', 'matrix', 'needs', 'steps'] as const;
export type ContextName = (typeof CONTEXT_NAMES)[number];

/** Values of the status functions in an `if:` condition (see dag.ts / status.ts). */
export interface StatusFunctions {
  success: boolean;
  failure: boolean;
  cancelled: boolean;
}

export interface ExpressionContext {
  /** The contexts available in this field; any other known context is "not available here". */
  contexts: Partial<Record<ContextName, JsonValue>>;
  /** Only `if:` conditions get status functions; elsewhere success() etc. are errors. */
  status?: StatusFunctions;
}

export type ExpressionErrorCode =
  | 'syntax'
  | 'unknown-context'
  | 'unavailable-context'
  | 'unknown-function'
  | 'arity'
  | 'unknown-property'
  | 'type'
  | 'status-function'
  | 'format'
  | 'json';

export interface ExpressionErrorInit {
  code: ExpressionErrorCode;
  /** What is wrong, without location. */
  detail: string;
  /** The expression text (inside `${{ }}`, trimmed). */
  expression: string;
  /** Where it appeared, e.g. `jobs.build.steps[0].run`. */
  field: string;
  /** 0-based offset of the problem in `expression`. */
  position: number;
  /** 0-based offset of the problem in the whole field value. */
  offset: number;
}

export class ExpressionError extends Error {
  readonly code: ExpressionErrorCode;
  readonly detail: string;
  readonly expression: string;
  readonly field: string;
  readonly position: number;
  readonly offset: number;

  constructor(init: ExpressionErrorInit) {
    super(`${init.field}: ${init.detail} (in "${init.expression}" at column ${init.position + 1})`);
    this.name = 'ExpressionError';
    ({
      code: this.code,
      detail: this.detail,
      expression: this.expression,
      field: this.field,
      position: this.position,
      offset: this.offset,
    } = init);
  }
}

// ---------------------------------------------------------------------------------------
// Closed context objects

const CLOSED = new WeakMap<object, string>();

/**
 * Marks a context object as closed: reading a key it does not have is an error naming the
 * available keys (`noun` names the kind of key: "step", "output", "job", "input", ...). Open
 * objects (fromJSON results) yield null for missing keys, as GitHub does.
 */
export function closedObject<T extends JsonValue>(entries: Record<string, T>, noun: string): Record<string, T> {
  CLOSED.set(entries, noun);
  return entries;
}

export function isClosedObject(v: JsonValue): boolean {
  return v !== null && typeof v === 'object' && CLOSED.has(v);
}

// ---------------------------------------------------------------------------------------
// Functions

interface Fn {
  name: string;
  min: number;
  max: number;
  status?: boolean;
}

const FUNCTIONS: Fn[] = [
  { name: 'contains', min: 2, max: 2 },
  { name: 'startsWith', min: 2, max: 2 },
  { name: 'endsWith', min: 2, max: 2 },
  { name: 'format', min: 1, max: Infinity },
  { name: 'join', min: 1, max: 2 },
  { name: 'toJSON', min: 1, max: 1 },
  { name: 'fromJSON', min: 1, max: 1 },
  { name: 'success', min: 0, max: 0, status: true },
  { name: 'failure', min: 0, max: 0, status: true },
  { name: 'always', min: 0, max: 0, status: true },
  { name: 'cancelled', min: 0, max: 0, status: true },
];
const FN_BY_LOWER = new Map(FUNCTIONS.map((f) => [f.name.toLowerCase(), f]));
export const FUNCTION_NAMES: readonly string[] = FUNCTIONS.map((f) => f.name);
export const STATUS_FUNCTIONS: readonly string[] = FUNCTIONS.filter((f) => f.status).map((f) => f.name);

function arityText(f: Fn): string {
  if (f.min === f.max) return `${f.min}`;
  return f.max === Infinity ? `at least ${f.min}` : `${f.min} to ${f.max}`;
}

// ---------------------------------------------------------------------------------------
// Static checks (no evaluation): contexts, functions, arity

export interface CheckOptions {
  /** Contexts the field may use. */
  contexts: readonly ContextName[];
  /** Whether status functions are allowed (if: conditions). */
  status?: boolean;
}

/** A read of a context through literal keys, e.g. needs.build.outputs.version. */
export interface Reference {
  context: string;
  path: string[];
  pos: number;
}

interface Where {
  source: string;
  field: string;
  offset: number;
}

function errorAt(code: ExpressionErrorCode, detail: string, w: Where, pos: number): ExpressionError {
  return new ExpressionError({
    code,
    detail,
    expression: w.source,
    field: w.field,
    position: pos,
    offset: w.offset + pos,
  });
}

function contextProblem(
  name: string,
  available: readonly string[],
): { code: ExpressionErrorCode; detail: string } | undefined {
  const lower = name.toLowerCase();
  if (available.some((c) => c === lower)) return undefined;
  const list = available.length ? available.join(', ') : 'none';
  if ((CONTEXT_NAMES as readonly string[]).includes(lower))
    return { code: 'unavailable-context', detail: `context "${lower}" is not available here (available: ${list})` };
  return { code: 'unknown-context', detail: `unknown context "${name}" (available here: ${list})` };
}

function functionProblem(
  node: Extract<ExprNode, { kind: 'call' }>,
  statusAllowed: boolean,
): { code: ExpressionErrorCode; detail: string } | undefined {
  const f = FN_BY_LOWER.get(node.name.toLowerCase());
  if (!f)
    return {
      code: 'unknown-function',
      detail: `unknown function "${node.name}" (supported: ${FUNCTION_NAMES.join(', ')})`,
    };
  if (node.args.length < f.min || node.args.length > f.max) {
    return { code: 'arity', detail: `${f.name}() takes ${arityText(f)} argument(s), got ${node.args.length}` };
  }
  if (f.status && !statusAllowed)
    return { code: 'status-function', detail: `${f.name}() is only available in if: conditions` };
  return undefined;
}

function children(n: ExprNode): ExprNode[] {
  switch (n.kind) {
    case 'property':
      return [n.object];
    case 'index':
      return [n.object, n.index];
    case 'not':
      return [n.operand];
    case 'binary':
      return [n.left, n.right];
    case 'call':
      return n.args;
    default:
      return [];
  }
}

function checkNode(n: ExprNode, opts: CheckOptions, w: Where): void {
  if (n.kind === 'context') {
    const p = contextProblem(n.name, opts.contexts);
    if (p) throw errorAt(p.code, p.detail, w, n.pos);
  }
  if (n.kind === 'call') {
    const p = functionProblem(n, opts.status === true);
    if (p) throw errorAt(p.code, p.detail, w, n.pos);
  }
  for (const c of children(n)) checkNode(c, opts, w);
}

function chainOf(n: ExprNode, out: Reference[]): (Reference & { open: boolean }) | undefined {
  if (n.kind === 'context') return { context: n.name.toLowerCase(), path: [], pos: n.pos, open: true };
  if (n.kind === 'property') {
    const c = chainOf(n.object, out);
    if (c?.open) c.path.push(n.name);
    return c;
  }
  if (n.kind === 'index') {
    const c = chainOf(n.object, out);
    collectInto(n.index, out);
    if (c?.open) {
      if (n.index.kind === 'literal' && (typeof n.index.value === 'string' || typeof n.index.value === 'number'))
        c.path.push(String(n.index.value));
      else c.open = false;
    }
    return c;
  }
  collectInto(n, out);
  return undefined;
}

function collectInto(n: ExprNode, out: Reference[]): void {
  if (n.kind === 'context' || n.kind === 'property' || n.kind === 'index') {
    const c = chainOf(n, out);
    if (c) out.push({ context: c.context, path: c.path, pos: c.pos });
    return;
  }
  for (const c of children(n)) collectInto(c, out);
}

/** Every context read with its literal key path (a dynamic index ends the path). */
export function collectReferences(ast: ExprNode): Reference[] {
  const out: Reference[] = [];
  collectInto(ast, out);
  return out;
}

/** True when the expression calls success(), failure(), always() or cancelled(). */
export function usesStatusFunction(ast: ExprNode): boolean {
  if (ast.kind === 'call' && FN_BY_LOWER.get(ast.name.toLowerCase())?.status) return true;
  return children(ast).some(usesStatusFunction);
}

// ---------------------------------------------------------------------------------------
// Evaluation

class Evaluator {
  constructor(
    private readonly ctx: ExpressionContext,
    private readonly w: Where,
  ) {}

  fail(code: ExpressionErrorCode, detail: string, pos: number): ExpressionError {
    return errorAt(code, detail, this.w, pos);
  }

  eval(n: ExprNode): JsonValue {
    switch (n.kind) {
      case 'literal':
        return n.value;
      case 'context':
        return this.context(n.name, n.pos);
      case 'property':
        return this.access(n.object, this.eval(n.object), n.name, n.pos);
      case 'index':
        return this.access(n.object, this.eval(n.object), this.eval(n.index), n.pos);
      case 'not':
        return !truthy(this.eval(n.operand));
      case 'call':
        return this.call(n);
      case 'binary':
        return this.binary(n);
    }
  }

  private context(name: string, pos: number): JsonValue {
    const available = CONTEXT_NAMES.filter((c) => this.ctx.contexts[c] !== undefined);
    const p = contextProblem(name, available);
    if (p) throw this.fail(p.code, p.detail, pos);
    return this.ctx.contexts[name.toLowerCase() as ContextName] ?? null;
  }

  private binary(n: Extract<ExprNode, { kind: 'binary' }>): JsonValue {
    const left = this.eval(n.left);
    if (n.op === '&&') return truthy(left) ? this.eval(n.right) : left;
    if (n.op === '||') return truthy(left) ? left : this.eval(n.right);
    const right = this.eval(n.right);
    if (n.op === '==') return looseEquals(left, right);
    if (n.op === '!=') return !looseEquals(left, right);
    return applyComparison(n.op, left, right);
  }

  private access(objNode: ExprNode, obj: JsonValue, key: JsonValue, pos: number): JsonValue {
    if (obj === null) return null;
    if (Array.isArray(obj)) return this.arrayAccess(objNode, obj, key, pos);
    if (typeof obj !== 'object') {
      throw this.fail(
        'type',
        `cannot read property ${JSON.stringify(key)} of ${kindOf(obj)} value ${printExpression(objNode)}`,
        pos,
      );
    }
    const k = toStringValue(key);
    if (k === undefined) throw this.fail('type', `cannot use an ${kindOf(key)} as a property name`, pos);
    return this.lookup(objNode, obj, k, pos);
  }

  private arrayAccess(objNode: ExprNode, arr: JsonValue[], key: JsonValue, pos: number): JsonValue {
    if (typeof key !== 'number') {
      throw this.fail(
        'type',
        `array ${printExpression(objNode)} can only be indexed by a number, not by ${kindOf(key)} ${JSON.stringify(key)}`,
        pos,
      );
    }
    return Number.isInteger(key) && key >= 0 && key < arr.length ? (arr[key] ?? null) : null;
  }

  private lookup(objNode: ExprNode, obj: { [k: string]: JsonValue }, key: string, pos: number): JsonValue {
    if (Object.hasOwn(obj, key)) return obj[key] ?? null;
    const lower = key.toLowerCase();
    const matches = Object.keys(obj).filter((k) => k.toLowerCase() === lower);
    if (matches.length === 1) return obj[matches[0] ?? ''] ?? null;
    const path = printExpression(objNode);
    if (matches.length > 1)
      throw this.fail(
        'unknown-property',
        `${path} has several keys matching "${key}" case-insensitively (${matches.sort().join(', ')})`,
        pos,
      );
    const noun = CLOSED.get(obj);
    if (noun === undefined) return null;
    const keys = Object.keys(obj).sort();
    const available = keys.length
      ? `available: ${keys.slice(0, 20).join(', ')}${keys.length > 20 ? ', ...' : ''}`
      : 'none available';
    throw this.fail('unknown-property', `${path} has no ${noun} "${key}" (${available})`, pos);
  }

  private str(v: JsonValue, what: string, pos: number): string {
    const s = toStringValue(v);
    if (s === undefined)
      throw this.fail('type', `${what} is an ${kindOf(v)}, which has no string form; use toJSON()`, pos);
    return s;
  }

  private call(n: Extract<ExprNode, { kind: 'call' }>): JsonValue {
    const p = functionProblem(n, this.ctx.status !== undefined);
    if (p) throw this.fail(p.code, p.detail, n.pos);
    const name = FN_BY_LOWER.get(n.name.toLowerCase())?.name ?? n.name;
    const status = this.ctx.status;
    if (status) {
      if (name === 'always') return true;
      if (name === 'success') return status.success && !status.cancelled;
      if (name === 'failure') return status.failure && !status.cancelled;
      if (name === 'cancelled') return status.cancelled;
    }
    const args = n.args.map((a) => this.eval(a));
    return this.library(name, args, n.pos);
  }

  private library(name: string, args: JsonValue[], pos: number): JsonValue {
    const [a = null, b = null] = args;
    switch (name) {
      case 'contains':
        return this.contains(a, b, pos);
      case 'startsWith':
        return this.str(a, 'the first argument of startsWith()', pos)
          .toUpperCase()
          .startsWith(this.str(b, 'the second argument of startsWith()', pos).toUpperCase());
      case 'endsWith':
        return this.str(a, 'the first argument of endsWith()', pos)
          .toUpperCase()
          .endsWith(this.str(b, 'the second argument of endsWith()', pos).toUpperCase());
      case 'format':
        return this.format(args, pos);
      case 'join':
        return this.join(a, args.length > 1 ? this.str(b, 'the separator of join()', pos) : ',', pos);
      case 'toJSON':
        return toJsonText(a);
      default:
        return this.fromJson(a, pos);
    }
  }

  private contains(search: JsonValue, item: JsonValue, pos: number): boolean {
    if (Array.isArray(search)) return search.some((e) => looseEquals(e, item));
    const hay = this.str(search, 'the first argument of contains()', pos).toUpperCase();
    return hay.includes(this.str(item, 'the second argument of contains()', pos).toUpperCase());
  }

  private format(args: JsonValue[], pos: number): string {
    const [fmt = null, ...rest] = args;
    const strs = rest.map((v, i) => this.str(v, `argument {${i}} of format()`, pos));
    try {
      return formatString(this.str(fmt, 'the format string', pos), strs);
    } catch (e) {
      if (e instanceof FormatProblem) throw this.fail('format', `format(): ${e.message}`, pos);
      throw e;
    }
  }

  private join(v: JsonValue, sep: string, pos: number): string {
    if (!Array.isArray(v)) return this.str(v, 'the first argument of join()', pos);
    return v.map((e, i) => this.str(e, `element ${i} of the array passed to join()`, pos)).join(sep);
  }

  private fromJson(v: JsonValue, pos: number): JsonValue {
    const text = this.str(v, 'the argument of fromJSON()', pos);
    try {
      return JSON.parse(text) as JsonValue;
    } catch (e) {
      throw this.fail(
        'json',
        `fromJSON(): invalid JSON ${JSON.stringify(text.length > 60 ? `${text.slice(0, 60)}...` : text)}: ${(e as Error).message}`,
        pos,
      );
    }
  }
}

// ---------------------------------------------------------------------------------------
// Parsing entry points

export type TemplateSegment =
  { kind: 'text'; text: string } | { kind: 'expr'; source: string; offset: number; ast: ExprNode };

function parseAt(source: string, field: string, offset: number): ExprNode {
  try {
    return parseExpression(source);
  } catch (e) {
    if (e instanceof SyntaxProblem) throw errorAt('syntax', e.detail, { source, field, offset }, e.pos);
    throw e;
  }
}

/** Index of the `}}` closing an expression that starts at `i`, skipping string literals; -1 if none. */
function closingBraces(text: string, i: number): number {
  while (i < text.length) {
    const c = text[i];
    if (c === "'") {
      i++;
      while (i < text.length && !(text[i] === "'" && text[i + 1] !== "'")) i += text[i] === "'" ? 2 : 1;
      i++;
      continue;
    }
    if (c === '}' && text[i + 1] === '}') return i;
    i++;
  }
  return -1;
}

/** Splits a field value into literal text and parsed `${{ }}` expressions. Throws ExpressionError. */
export function parseTemplate(text: string, field: string): TemplateSegment[] {
  const out: TemplateSegment[] = [];
  let i = 0;
  for (;;) {
    const start = text.indexOf('${{', i);
    if (start < 0) break;
    if (start > i) out.push({ kind: 'text', text: text.slice(i, start) });
    const end = closingBraces(text, start + 3);
    const raw = text.slice(start + 3, end < 0 ? text.length : end);
    const lead = raw.length - raw.trimStart().length;
    const source = raw.trim();
    const offset = start + 3 + lead;
    if (end < 0) throw errorAt('syntax', "unterminated '${{' (missing '}}')", { source, field, offset }, 0);
    out.push({ kind: 'expr', source, offset, ast: parseAt(source, field, offset) });
    i = end + 2;
  }
  if (i < text.length) out.push({ kind: 'text', text: text.slice(i) });
  return out;
}

export function hasExpression(text: string): boolean {
  return text.includes('${{');
}

/** Evaluates a bare expression (no `${{ }}`). */
export function evaluateExpression(source: string, ctx: ExpressionContext, field: string): JsonValue {
  return new Evaluator(ctx, { source, field, offset: 0 }).eval(parseAt(source, field, 0));
}

function evalSegment(
  seg: Extract<TemplateSegment, { kind: 'expr' }>,
  ctx: ExpressionContext,
  field: string,
): JsonValue {
  return new Evaluator(ctx, { source: seg.source, field, offset: seg.offset }).eval(seg.ast);
}

/** Replaces every `${{ }}` in `text` by its string value; arrays/objects are errors (use toJSON). */
export function interpolate(text: string, ctx: ExpressionContext, field: string): string {
  let out = '';
  for (const seg of parseTemplate(text, field)) {
    if (seg.kind === 'text') {
      out += seg.text;
      continue;
    }
    const v = evalSegment(seg, ctx, field);
    const s = toStringValue(v);
    if (s === undefined) {
      throw errorAt(
        'type',
        `the expression evaluates to an ${kindOf(v)}, which cannot be inserted into a string; use toJSON()`,
        { source: seg.source, field, offset: seg.offset },
        0,
      );
    }
    out += s;
  }
  return out;
}

/**
 * Typed value of a field: a field that is exactly one `${{ }}` yields the expression's value
 * (number, boolean, object...); anything else is interpolated into a string.
 */
export function evaluateTemplate(text: string, ctx: ExpressionContext, field: string): JsonValue {
  const segs = parseTemplate(text, field);
  const only = segs[0];
  if (segs.length === 1 && only?.kind === 'expr') return evalSegment(only, ctx, field);
  return interpolate(text, ctx, field);
}

export interface ParsedCondition {
  source: string;
  offset: number;
  ast: ExprNode;
  implicitSuccess: boolean;
}

const SUCCESS_CALL: ExprNode = { kind: 'call', name: 'success', args: [], pos: 0 };

/**
 * Parses an `if:` value. `${{ }}` is optional but, when present, must wrap the whole value:
 * text around it would make a non-empty string that is always true, so it is rejected. An
 * empty or absent condition means `success()`.
 */
export function parseCondition(text: string | undefined, field: string): ParsedCondition {
  if (text === undefined || text.trim() === '')
    return { source: 'success()', offset: 0, ast: SUCCESS_CALL, implicitSuccess: false };
  let source = text.trim();
  let offset = text.length - text.trimStart().length;
  let ast: ExprNode;
  if (hasExpression(text)) {
    const segs = parseTemplate(text, field);
    const exprs = segs.filter((s): s is Extract<TemplateSegment, { kind: 'expr' }> => s.kind === 'expr');
    const stray = segs.some((s) => s.kind === 'text' && s.text.trim() !== '');
    const first = exprs[0];
    if (exprs.length !== 1 || stray || !first) {
      throw errorAt(
        'syntax',
        'an if: condition must be a single expression; text around or between ${{ }} makes a non-empty string that is always true',
        { source, field, offset },
        0,
      );
    }
    ({ source, offset, ast } = first);
  } else ast = parseAt(source, field, offset);
  const implicitSuccess = !usesStatusFunction(ast);
  return {
    source,
    offset,
    ast: implicitSuccess ? { kind: 'binary', op: '&&', left: SUCCESS_CALL, right: ast, pos: 0 } : ast,
    implicitSuccess,
  };
}

/** Evaluates an `if:` condition to a boolean (truthiness of the result). */
export function evaluateCondition(text: string | undefined, ctx: ExpressionContext, field: string): boolean {
  const c = parseCondition(text, field);
  const status = ctx.status ?? { success: true, failure: false, cancelled: false };
  return truthy(new Evaluator({ ...ctx, status }, { source: c.source, field, offset: c.offset }).eval(c.ast));
}

/**
 * Static validation of a field value without evaluating it: syntax, contexts available in the
 * field, function names and argument counts. Returns the parsed expressions.
 */
export function checkTemplate(text: string, field: string, opts: CheckOptions): ExprNode[] {
  const out: ExprNode[] = [];
  for (const seg of parseTemplate(text, field)) {
    if (seg.kind !== 'expr') continue;
    checkNode(seg.ast, opts, { source: seg.source, field, offset: seg.offset });
    out.push(seg.ast);
  }
  return out;
}

/** Static validation of an `if:` condition (status functions allowed). */
export function checkCondition(
  text: string | undefined,
  field: string,
  contexts: readonly ContextName[],
): ParsedCondition {
  const c = parseCondition(text, field);
  checkNode(c.ast, { contexts, status: true }, { source: c.source, field, offset: c.offset });
  return c;
}
