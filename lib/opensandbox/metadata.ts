/**
 * Sandbox metadata rules (Kubernetes label rules; `opensandbox.io/` reserved) and the encoding of
 * the list filter `?metadata=`: the parameter value is itself a URL-encoded `k=v&k2=v2` query
 * string (the server parses it with parse_qsl after the normal query decoding).
 */
import { RESERVED_METADATA_PREFIX } from './types.ts';

const NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Why a metadata key is not acceptable, or undefined. */
export function metadataKeyProblem(key: string): string | undefined {
  if (key.startsWith(RESERVED_METADATA_PREFIX))
    return `metadata key ${JSON.stringify(key)}: the ${RESERVED_METADATA_PREFIX} prefix is reserved`;
  const slash = key.indexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined && (prefix.length === 0 || prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix)))
    return `metadata key ${JSON.stringify(key)}: prefix must be a DNS subdomain`;
  if (name.length === 0 || name.length > 63 || !NAME.test(name))
    return `metadata key ${JSON.stringify(key)}: name must be 1-63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric`;
  return undefined;
}

/** Why a metadata value is not acceptable, or undefined. */
export function metadataValueProblem(value: string): string | undefined {
  return value.length <= 63 && VALUE.test(value)
    ? undefined
    : `metadata value ${JSON.stringify(value)}: must be at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric`;
}

export function metadataProblem(metadata: Record<string, string>): string | undefined {
  for (const [k, v] of Object.entries(metadata)) {
    const p = metadataKeyProblem(k) ?? metadataValueProblem(v);
    if (p) return p;
  }
  return undefined;
}

/** The inner query string for `?metadata=` (URLSearchParams encoding; sorted for determinism). */
export function encodeMetadataFilter(metadata: Record<string, string>): string {
  return new URLSearchParams(Object.entries(metadata).sort(([a], [b]) => a.localeCompare(b))).toString();
}

/** Parses the decoded `metadata` parameter back into pairs; undefined when malformed (e.g. a segment without '='). */
export function decodeMetadataFilter(raw: string): Record<string, string> | undefined {
  const out: Record<string, string> = {};
  if (raw === '') return out;
  for (const seg of raw.split('&')) {
    if (!seg.includes('=')) return undefined;
    for (const [k, v] of new URLSearchParams(seg)) {
      if (!k) return undefined;
      out[k] = v;
    }
  }
  return out;
}
