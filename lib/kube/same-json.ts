/**
 * Change detection for API objects. The API server serialises custom resources with their keys in
 * its own (sorted) order, while a controller builds its next status in the order it assigns the
 * fields, so comparing `JSON.stringify` of both finds a change where there is none, and the
 * controller writes an unchanged status on every reconcile (issue 17). Compare with this instead.
 */

/** JSON with object keys sorted and undefined members left out (as JSON.stringify leaves them out). */
export function stableJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map((x) => stableJson(x ?? null)).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.entries(v as Record<string, unknown>)
      .filter(([, x]) => x !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, x]) => `${JSON.stringify(k)}:${stableJson(x)}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

/**
 * Whether a and b are the same JSON value, whatever the order of their keys: what comparing their
 * `stableJson` says, compared in place (no strings built; it runs on every watch event of some
 * controllers, and building both strings was a tenth of the extension server's CPU, issue 17).
 */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && sameItems(a, b);
  if (!isObject(a) || !isObject(b) || Array.isArray(b)) return false;
  let count = 0;
  for (const k in a) {
    const x = a[k];
    if (x === undefined) continue;
    count++;
    if (!Object.hasOwn(b, k) || !sameJson(x, b[k])) return false;
  }
  for (const k in b) if (b[k] !== undefined) count--;
  return count === 0;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;

/** Items compare as JSON.stringify writes them: an undefined item as null. */
function sameItems(a: unknown[], b: unknown[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!sameJson(a[i] ?? null, b[i] ?? null)) return false;
  return true;
}
