/**
 * X.509 for webhook, aggregated-API and runtimed's serving certificates (ECDSA P-256, SHA-256),
 * built with node:crypto alone: the certificate's DER by hand (der.ts), keys and signatures from
 * node:crypto. No X.509 library stays loaded in the processes that issue one (runtimed issues two
 * at every start).
 */
import { createPrivateKey, generateKeyPairSync, randomBytes, sign, X509Certificate, type KeyObject } from 'node:crypto';
import { isIP } from 'node:net';
import {
  bits,
  boolean,
  children,
  explicit,
  implicit,
  namedBits,
  octets,
  oid,
  read,
  sequence,
  set,
  time,
  tlv,
  unsigned,
  utf8,
} from './der.ts';

export interface KeyPairPem {
  cert: string;
  key: string;
}

const ECDSA_SHA256 = sequence(oid('1.2.840.10045.4.3.2'));
const KEY_USAGE = { digitalSignature: 0, keyEncipherment: 2, keyCertSign: 5, cRLSign: 6 };

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return sequence(oid(id), ...(critical ? [boolean(true)] : []), octets(value));
}

const commonName = (cn: string): Buffer => sequence(set(sequence(oid('2.5.4.3'), utf8(cn))));

/** A positive 16-byte serial number whose DER INTEGER is minimal (first byte 0x01–0x7f). */
function serial(): Buffer {
  const b = randomBytes(16);
  b[0] = (b[0] ?? 0) & 0x7f || 1;
  return unsigned(b);
}

/** The IP address bytes of a SAN entry (IPv4 dotted quad or IPv6 in hex groups). */
function ipBytes(ip: string): Buffer {
  const kind = isIP(ip);
  if (kind === 4) return Buffer.from(ip.split('.').map(Number));
  if (kind !== 6 || ip.includes('.')) throw new Error(`not an IP address for a certificate: ${ip}`);
  const [head = '', tail = ''] = ip.split('::');
  const groups = (s: string): string[] => (s ? s.split(':') : []);
  const h = groups(head);
  const t = ip.includes('::') ? groups(tail) : [];
  const all = [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  return Buffer.from(all.map((g) => g.padStart(4, '0')).join(''), 'hex');
}

interface Tbs {
  subject: Buffer;
  issuer: Buffer;
  now: Date;
  days: number;
  publicKey: KeyObject;
  extensions: Buffer[];
}

/** The signed certificate (RFC 5280 4.1) in PEM. */
function certificate(t: Tbs, signingKey: KeyObject): string {
  const tbs = sequence(
    explicit(0, tlv(0x02, Buffer.from([2]))),
    serial(),
    ECDSA_SHA256,
    t.issuer,
    sequence(time(new Date(t.now.getTime() - 60_000)), time(new Date(t.now.getTime() + t.days * 86_400_000))),
    t.subject,
    t.publicKey.export({ type: 'spki', format: 'der' }),
    explicit(3, sequence(...t.extensions)),
  );
  const signature = sign('sha256', tbs, { key: signingKey, dsaEncoding: 'der' });
  const der = sequence(tbs, ECDSA_SHA256, bits(signature));
  const b64 = der.toString('base64').replace(/(.{64})/g, '$1\n');
  return `-----BEGIN CERTIFICATE-----\n${b64.replace(/\n$/, '')}\n-----END CERTIFICATE-----`;
}

const newKeys = (): { publicKey: KeyObject; privateKey: KeyObject } =>
  generateKeyPairSync('ec', { namedCurve: 'P-256' });

const pkcs8 = (k: KeyObject): string => k.export({ type: 'pkcs8', format: 'pem' }).toString();

export function createCa(cn: string, now: Date, days: number): Promise<KeyPairPem> {
  const keys = newKeys();
  const name = commonName(cn);
  const cert = certificate(
    {
      subject: name,
      issuer: name,
      now,
      days,
      publicKey: keys.publicKey,
      extensions: [
        extension('2.5.29.19', true, sequence(boolean(true))),
        extension('2.5.29.15', true, namedBits([KEY_USAGE.keyCertSign, KEY_USAGE.cRLSign])),
      ],
    },
    keys.privateKey,
  );
  return Promise.resolve({ cert, key: pkcs8(keys.privateKey) });
}

/** The subject Name of a certificate exactly as encoded: a certificate it issues names it byte for byte. */
function rawSubject(pem: string): Buffer {
  const der = new X509Certificate(pem).raw;
  const tbs = children(der, read(der))[0];
  if (!tbs) throw new Error('certificate without tbsCertificate');
  const fields = children(der, tbs);
  const at = fields[0]?.tag === 0xa0 ? 5 : 4; // [0] version, serial, signature, issuer, validity, subject
  const subject = fields[at];
  if (!subject) throw new Error('certificate without subject');
  return subject.whole;
}

export function issueServing(
  ca: KeyPairPem,
  cn: string,
  san: { dns: string[]; ips: string[] },
  now: Date,
  days: number,
): Promise<KeyPairPem> {
  const keys = newKeys();
  const names = [
    ...san.dns.map((d) => implicit(2, Buffer.from(d, 'ascii'))),
    ...san.ips.map((i) => implicit(7, ipBytes(i))),
  ];
  const extensions = [
    extension('2.5.29.19', true, sequence()),
    extension('2.5.29.15', true, namedBits([KEY_USAGE.digitalSignature, KEY_USAGE.keyEncipherment])),
    extension('2.5.29.37', false, sequence(oid('1.3.6.1.5.5.7.3.1'))),
    extension('2.5.29.17', false, sequence(...names)),
  ];
  const issuer = rawSubject(ca.cert);
  const tbs = { subject: commonName(cn), issuer, now, days, publicKey: keys.publicKey, extensions };
  const cert = certificate(tbs, createPrivateKey(ca.key));
  return Promise.resolve({ cert, key: pkcs8(keys.privateKey) });
}

export function notAfter(pem: string): Date {
  const c = new X509Certificate(pem);
  return c.validToDate ?? new Date(c.validTo);
}

/** The PEM certificates in a bundle, in order. */
export function splitBundle(bundle: string): string[] {
  return bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
}
