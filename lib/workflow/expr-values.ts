/**
 * Value semantics of the GitHub Actions expression language: truthiness, loose equality and
 * ordering with GitHub's number coercion, case-insensitive string comparison, and string
 * conversion. Pure helpers used by expressions.ts.
 */
import type { JsonValue } from './types.ts';

export type ValueKind = 'null' | 'boolean' | 'number' | 'string' | 'array' | 'object';

export function kindOf(v: JsonValue): ValueKind {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  const t = typeof v;
  if (t === 'boolean' || t === 'number' || t === 'string') return t;
  return 'object';
}

/** Falsy: false, 0, -0, NaN, '' and null. Arrays and objects are always truthy. */
export function truthy(v: JsonValue): boolean {
  if (v === null || v === false || v === '') return false;
  if (typeof v === 'number') return v !== 0 && !Number.isNaN(v);
  return true;
}

const NUMERIC = /^[+-]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|Infinity)$/;

/** GitHub number coercion: null→0, true→1, false→0, '' / whitespace→0, numeric string→number, else NaN. */
export function toNumber(v: JsonValue): number {
  if (v === null) return 0;
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (typeof v === 'number') return v;
  if (typeof v !== 'string') return NaN;
  const s = v.trim();
  if (s === '') return 0;
  if (!NUMERIC.test(s)) return NaN;
  const neg = s.startsWith('-');
  const body = s.replace(/^[+-]/, '');
  const n = /^0[xX]/.test(body) ? parseInt(body.slice(2), 16) : Number(body);
  return neg ? -n : n;
}

export function formatNumber(n: number): string {
  if (Object.is(n, -0)) return '0';
  return String(n);
}

/**
 * String conversion: null→'', booleans→'true'/'false', numbers in shortest form. Arrays and
 * objects have no faithful string form (GitHub prints 'Array'/'Object'); undefined is returned
 * so callers can raise an error that suggests toJSON().
 */
export function toStringValue(v: JsonValue): string | undefined {
  if (v === null) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'number') return formatNumber(v);
  return undefined;
}

function upper(s: string): string {
  return s.toUpperCase();
}

/**
 * `==`: same kinds compare directly (strings case-insensitively, arrays/objects by identity,
 * NaN never equal); different kinds are both coerced to numbers.
 */
export function looseEquals(a: JsonValue, b: JsonValue): boolean {
  const ka = kindOf(a);
  const kb = kindOf(b);
  if (ka === kb) {
    if (ka === 'string') return upper(a as string) === upper(b as string);
    return a === b;
  }
  const na = toNumber(a);
  const nb = toNumber(b);
  return na === nb;
}

/**
 * Ordering for `< <= > >=`: two strings compare case-insensitively (ordinal); everything else
 * is coerced to numbers. Returns NaN when the values are not comparable (then every ordering
 * operator is false).
 */
export function compareValues(a: JsonValue, b: JsonValue): number {
  if (typeof a === 'string' && typeof b === 'string') {
    const ua = upper(a);
    const ub = upper(b);
    return ua < ub ? -1 : ua > ub ? 1 : 0;
  }
  const na = toNumber(a);
  const nb = toNumber(b);
  if (Number.isNaN(na) || Number.isNaN(nb)) return NaN;
  return na < nb ? -1 : na > nb ? 1 : 0;
}

export function applyComparison(op: '<' | '<=' | '>' | '>=', a: JsonValue, b: JsonValue): boolean {
  const c = compareValues(a, b);
  if (Number.isNaN(c)) return false;
  if (op === '<') return c < 0;
  if (op === '<=') return c <= 0;
  if (op === '>') return c > 0;
  return c >= 0;
}

/** Pretty JSON with two-space indentation, as GitHub's toJSON(). */
export function toJsonText(v: JsonValue): string {
  return JSON.stringify(v, null, 2);
}

/** Problems in format() strings; the caller turns them into ExpressionErrors. */
export class FormatProblem extends Error {}

/**
 * GitHub format(): `{N}` is replaced by argument N, `{{` and `}}` are literal braces. A
 * reference past the supplied arguments, an unclosed or malformed placeholder is an error.
 */
export function formatString(fmt: string, args: string[]): string {
  let out = '';
  let i = 0;
  while (i < fmt.length) {
    const c = fmt[i] ?? '';
    if ((c === '{' || c === '}') && fmt[i + 1] === c) {
      out += c;
      i += 2;
      continue;
    }
    if (c === '}') throw new FormatProblem(`unmatched '}' at index ${i} of the format string`);
    if (c !== '{') {
      out += c;
      i++;
      continue;
    }
    const close = fmt.indexOf('}', i);
    const body = close < 0 ? '' : fmt.slice(i + 1, close);
    if (close < 0 || !/^\d+$/.test(body))
      throw new FormatProblem(`invalid placeholder at index ${i} of the format string (expected {N})`);
    const n = Number(body);
    const arg = args[n];
    if (arg === undefined)
      throw new FormatProblem(
        `the format string references argument {${n}} but only ${args.length} argument(s) were supplied`,
      );
    out += arg;
    i = close + 1;
  }
  return out;
}
