/**
 * Change detection for API objects. The API server serialises custom resources with their keys in
 * its own (sorted) order, while a controller builds its next status in the order it assigns the
 * fields, so comparing `JSON.stringify` of both finds a change where there is none, and the
 * controller writes an unchanged status on every reconcile (issue 17). Compare with this instead.
 */

/** JSON with object keys sorted and undefined members left out (as JSON.stringify leaves them out). */
export function stableJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableJson).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.entries(v as Record<string, unknown>)
      .filter(([, x]) => x !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, x]) => `${JSON.stringify(k)}:${stableJson(x)}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

/** Whether a and b are the same JSON value, whatever the order of their keys. */
export const sameJson = (a: unknown, b: unknown): boolean => stableJson(a) === stableJson(b);
