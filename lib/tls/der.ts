/**
 * The few ASN.1 DER encodings an X.509 certificate needs (X.690), and a reader of one element's
 * tag and extent, so that certificates are built with node:crypto alone (certs.ts).
 */

function length(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

/** One element: its tag byte, its length, its content. */
export function tlv(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), length(body.length), body]);
}

export const sequence = (...items: Buffer[]): Buffer => tlv(0x30, ...items);
export const set = (...items: Buffer[]): Buffer => tlv(0x31, ...items);
export const octets = (b: Buffer): Buffer => tlv(0x04, b);
export const utf8 = (s: string): Buffer => tlv(0x0c, Buffer.from(s, 'utf8'));
export const boolean = (v: boolean): Buffer => tlv(0x01, Buffer.from([v ? 0xff : 0]));
/** A context-specific tag: constructed ([n] EXPLICIT) or primitive ([n] IMPLICIT of a primitive). */
export const explicit = (n: number, ...content: Buffer[]): Buffer => tlv(0xa0 | n, ...content);
export const implicit = (n: number, content: Buffer): Buffer => tlv(0x80 | n, content);

/** A non-negative INTEGER from its big-endian bytes, minimally encoded. */
export function unsigned(bytes: Buffer): Buffer {
  let i = 0;
  while (i < bytes.length - 1 && bytes[i] === 0) i++;
  const v = bytes.subarray(i);
  return tlv(0x02, (v[0] ?? 0) & 0x80 ? Buffer.concat([Buffer.from([0]), v]) : v);
}

export function oid(dotted: string): Buffer {
  const [a = 0, b = 0, ...rest] = dotted.split('.').map(Number);
  const out = [40 * a + b];
  for (const n of rest) {
    const groups: number[] = [];
    for (let v = n; ; v = Math.floor(v / 128)) {
      groups.unshift(v & 0x7f);
      if (v < 128) break;
    }
    out.push(...groups.map((g, i) => (i < groups.length - 1 ? g | 0x80 : g)));
  }
  return tlv(0x06, Buffer.from(out));
}

/** A BIT STRING of whole bytes (a signature, a key). */
export const bits = (b: Buffer): Buffer => tlv(0x03, Buffer.from([0]), b);

/** A named BIT STRING (e.g. KeyUsage) with these bit numbers set; trailing zero bits dropped (X.690 11.2.2). */
export function namedBits(set: number[]): Buffer {
  const top = Math.max(...set);
  const bytes = Buffer.alloc(Math.floor(top / 8) + 1);
  for (const n of set) bytes[n >> 3] = (bytes[n >> 3] ?? 0) | (0x80 >> (n & 7));
  return tlv(0x03, Buffer.from([7 - (top & 7)]), bytes);
}

/** UTCTime up to 2049, GeneralizedTime from 2050 (RFC 5280 4.1.2.5), to the second. */
export function time(d: Date): Buffer {
  const iso = d.toISOString().replace(/[-:T]/g, '').slice(0, 14) + 'Z';
  const year = d.getUTCFullYear();
  if (year >= 1950 && year < 2050) return tlv(0x17, Buffer.from(iso.slice(2), 'ascii'));
  return tlv(0x18, Buffer.from(iso, 'ascii'));
}

/** The element at offset: its whole encoding and its content's extent. */
export function read(der: Buffer, offset = 0): { tag: number; start: number; end: number; whole: Buffer } {
  const tag = der[offset] ?? -1;
  let len = der[offset + 1] ?? 0;
  let start = offset + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + (der[start + i] ?? 0);
    start += n;
  }
  const end = start + len;
  if (tag < 0 || end > der.length) throw new Error('truncated DER element');
  return { tag, start, end, whole: der.subarray(offset, end) };
}

/** The children of a constructed element. */
export function children(der: Buffer, el: { start: number; end: number }): ReturnType<typeof read>[] {
  const out: ReturnType<typeof read>[] = [];
  for (let at = el.start; at < el.end;) {
    const c = read(der, at);
    out.push(c);
    at = c.end;
  }
  return out;
}
