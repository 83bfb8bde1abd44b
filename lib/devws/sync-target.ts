/**
 * Where the Git Server's sync may connect (ADR 0026), pure: every address the repository's host
 * resolves to must lie outside the internal ranges (loopback, link-local and cloud metadata,
 * private, shared, multicast, reserved, and any range the installation adds, e.g. the cluster's
 * service and pod CIDRs), unless the server's allow-list names it. The fetch is then pinned to a
 * vetted address and follows no redirect, so a second resolution or a redirect cannot reach
 * anywhere else.
 */
import { isIP } from 'node:net';
import { GitAccessError } from './git-access.ts';

export interface Cidr {
  text: string;
  family: 4 | 6;
  base: bigint;
  bits: number;
}

/** Ranges a sync never fetches from unless allow-listed. */
export const DENIED_BY_DEFAULT = [
  '0.0.0.0/8', // "this network", unspecified
  '10.0.0.0/8', // private (often the cluster's pod or service range)
  '100.64.0.0/10', // shared address space (carrier-grade NAT, some clusters' pod ranges)
  '127.0.0.0/8', // loopback
  '169.254.0.0/16', // link-local, cloud metadata (169.254.169.254)
  '172.16.0.0/12', // private
  '192.0.0.0/24', // IETF protocol assignments
  '192.168.0.0/16', // private
  '198.18.0.0/15', // benchmarking
  '224.0.0.0/4', // multicast
  '240.0.0.0/4', // reserved, broadcast
  '::/128', // unspecified
  '::1/128', // loopback
  '64:ff9b:1::/48', // local-use NAT64
  'fc00::/7', // unique local (private)
  'fe80::/10', // link-local
  'ff00::/8', // multicast
];

function v4(ip: string): bigint {
  return ip.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
}

function v6(ip: string): bigint {
  let text = ip;
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (tail?.[1]) {
    const n = v4(tail[1]);
    text = `${text.slice(0, -tail[1].length)}${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
  }
  const [head = '', rest] = text.split('::');
  const left = head ? head.split(':') : [];
  const right = rest ? rest.split(':') : [];
  const groups =
    rest === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return groups.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g || '0', 16)), 0n);
}

/** Parses `a.b.c.d/n` or `x::y/n` (a bare address is a single-address range). */
export function parseCidr(text: string): Cidr {
  const [addr = '', len] = text.trim().split('/');
  const family = isIP(addr);
  const max = family === 4 ? 32 : 128;
  const bits = len === undefined ? max : Number(len);
  if (!family || !Number.isInteger(bits) || bits < 0 || bits > max || (len !== undefined && !/^\d+$/.test(len)))
    throw new Error(`not a CIDR: ${text}`);
  const value = family === 4 ? v4(addr) : v6(addr);
  const shift = BigInt(max - bits);
  return { text: text.trim(), family: family as 4 | 6, base: (value >> shift) << shift, bits };
}

/** A comma- or whitespace-separated list of CIDRs (configuration); throws on a bad entry. */
export const parseCidrList = (text: string | undefined): Cidr[] =>
  (text ?? '')
    .split(/[\s,]+/)
    .filter(Boolean)
    .map(parseCidr);

/** The IPv4 address an IPv4-mapped IPv6 address (::ffff:a.b.c.d) stands for, else the address itself. */
function unmapped(ip: string): string {
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (m?.[1]) return m[1];
  if (isIP(ip) === 6) {
    const n = v6(ip);
    if (n >> 32n === 0xffffn) return [24n, 16n, 8n, 0n].map((s) => String((n >> s) & 0xffn)).join('.');
  }
  return ip;
}

export function contains(c: Cidr, ip: string): boolean {
  const family = isIP(ip);
  if (family !== c.family) return false;
  const max = family === 4 ? 32 : 128;
  const shift = BigInt(max - c.bits);
  return ((family === 4 ? v4(ip) : v6(ip)) >> shift) << shift === c.base;
}

export interface TargetPolicy {
  /** Ranges refused in addition to DENIED_BY_DEFAULT (e.g. the cluster's public service/pod CIDRs). */
  deny: Cidr[];
  /** Ranges allowed although denied (an installation's own internal Git host; the e2e's host). */
  allow: Cidr[];
}

const DEFAULT_DENY = DENIED_BY_DEFAULT.map(parseCidr);

/** Throws 403 sync_target_forbidden when the address is internal and not allow-listed. */
export function checkAddress(address: string, policy: TargetPolicy): void {
  const ip = unmapped(address);
  if (!isIP(ip)) throw new GitAccessError('sync_target_forbidden', 403, `${address} is not an IP address`);
  if (policy.allow.some((c) => contains(c, ip))) return;
  const hit = [...DEFAULT_DENY, ...policy.deny].find((c) => contains(c, ip));
  if (hit)
    throw new GitAccessError(
      'sync_target_forbidden',
      403,
      `the repository host resolves to ${ip}, inside ${hit.text}, which is not allow-listed`,
    );
}

/**
 * Vets every address the repository host resolves to (one internal address refuses the sync, so
 * that round-robin answers cannot smuggle one in) and returns the one to pin the fetch to.
 */
export function vetAddresses(host: string, addresses: string[], policy: TargetPolicy): string {
  if (!addresses.length) throw new GitAccessError('sync_target_forbidden', 403, `${host} does not resolve`);
  for (const a of addresses) checkAddress(a, policy);
  return addresses[0] ?? '';
}
