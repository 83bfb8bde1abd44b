/**
 * Exact Kubernetes resource.Quantity arithmetic (Run scheduler capacity, JobClass resource policy).
 *
 * Quantities are parsed into exact rationals (bigint numerator and denominator), so capacity
 * checks and LeastLoaded utilization ratios never suffer floating point drift. The accepted
 * grammar is the apimachinery one: `[+-]<digits>[.<digits>]` followed by a binary SI suffix
 * (Ki..Ei), a decimal SI suffix (m, "", k, M, G, T, P, E) or a decimal exponent (e3, E-2).
 */

/** An exact rational number; `d` is always positive and the fraction is reduced. */
export interface Rat {
  readonly n: bigint;
  readonly d: bigint;
}

export const ZERO: Rat = { n: 0n, d: 1n };

const BINARY_SUFFIX: Record<string, number> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };
const DECIMAL_SUFFIX: Record<string, number> = { m: -3, '': 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
/** Decimal exponents beyond this are rejected to keep bigint sizes bounded (apimachinery caps far lower in practice). */
const MAX_EXPONENT = 64;
const QUANTITY = /^([+-]?)(\d+(?:\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|m|k|M|G|T|P|E)?$/;

function gcd(a: bigint, b: bigint): bigint {
  let x = a < 0n ? -a : a;
  let y = b < 0n ? -b : b;
  while (y !== 0n) [x, y] = [y, x % y];
  return x;
}

/** Builds a reduced rational; `d` must be non-zero. */
export function rat(n: bigint, d = 1n): Rat {
  if (d === 0n) throw new RangeError('rational with zero denominator');
  const sign = d < 0n ? -1n : 1n;
  const g = gcd(n, d) || 1n;
  return { n: (sign * n) / g, d: (sign * d) / g };
}

export function add(a: Rat, b: Rat): Rat {
  return a.d === b.d ? rat(a.n + b.n, a.d) : rat(a.n * b.d + b.n * a.d, a.d * b.d);
}

export function div(a: Rat, b: Rat): Rat {
  return rat(a.n * b.d, a.d * b.n);
}

/** Returns -1, 0 or 1 as a is less than, equal to or greater than b. */
export function cmp(a: Rat, b: Rat): number {
  const l = a.n * b.d;
  const r = b.n * a.d;
  return l < r ? -1 : l > r ? 1 : 0;
}

export function isInteger(a: Rat): boolean {
  return a.d === 1n;
}

/** Largest integer not greater than a. */
export function floor(a: Rat): bigint {
  const q = a.n / a.d;
  return a.n < 0n && q * a.d !== a.n ? q - 1n : q;
}

function scale(exponent: number, base: bigint): Rat {
  return exponent >= 0 ? rat(base ** BigInt(exponent)) : rat(1n, base ** BigInt(-exponent));
}

function suffixFactor(suffix: string): Rat | undefined {
  const binary = BINARY_SUFFIX[suffix];
  if (binary !== undefined) return scale(binary, 2n);
  const decimal = DECIMAL_SUFFIX[suffix];
  if (decimal !== undefined) return scale(decimal, 10n);
  const exponent = Number(suffix.slice(1));
  if (!Number.isSafeInteger(exponent) || Math.abs(exponent) > MAX_EXPONENT) return undefined;
  return scale(exponent, 10n);
}

/**
 * Parses a Kubernetes quantity (string, or a JSON number as int-or-string fields allow) into an
 * exact rational. Returns undefined when the text is not a quantity.
 */
export function parseQuantity(raw: string | number): Rat | undefined {
  const text = typeof raw === 'number' ? (Number.isFinite(raw) ? String(raw) : '') : raw.trim();
  const m = QUANTITY.exec(text);
  if (!m) return undefined;
  const [, sign = '', number = '', suffix = ''] = m;
  const [whole = '', fraction = ''] = number.split('.');
  const mantissa = rat(BigInt(`${whole}${fraction}` || '0'), 10n ** BigInt(fraction.length));
  const factor = suffixFactor(suffix);
  if (!factor) return undefined;
  const value = rat(mantissa.n * factor.n, mantissa.d * factor.d);
  return sign === '-' ? rat(-value.n, value.d) : value;
}
