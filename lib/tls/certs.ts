/** X.509 for webhook and aggregated-API serving certificates (@peculiar/x509 over WebCrypto, ECDSA P-256). */
import { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);
type CryptoKey = webcrypto.CryptoKey;
const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

export interface KeyPairPem {
  cert: string;
  key: string;
}

async function exportKey(k: CryptoKey): Promise<string> {
  const der = await webcrypto.subtle.exportKey('pkcs8', k);
  return x509.PemConverter.encode(der, 'PRIVATE KEY');
}

async function importKey(pem: string): Promise<CryptoKey> {
  const der = x509.PemConverter.decode(pem)[0];
  if (!der) throw new Error('no PEM block in private key');
  return webcrypto.subtle.importKey('pkcs8', der, ALG, true, ['sign']);
}

const serial = (): string =>
  webcrypto
    .getRandomValues(new Uint8Array(16))
    .reduce((s, b) => s + b.toString(16).padStart(2, '0'), '')
    .replace(/^[89a-f]/, '1');

export async function createCa(cn: string, now: Date, days: number): Promise<KeyPairPem> {
  const keys = await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${cn}`,
    notBefore: new Date(now.getTime() - 60_000),
    notAfter: new Date(now.getTime() + days * 86_400_000),
    signingAlgorithm: ALG,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
    ],
  });
  return { cert: cert.toString('pem'), key: await exportKey(keys.privateKey) };
}

export async function issueServing(
  ca: KeyPairPem,
  cn: string,
  san: { dns: string[]; ips: string[] },
  now: Date,
  days: number,
): Promise<KeyPairPem> {
  const { dns, ips } = san;
  const keys = await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']);
  const caCert = new x509.X509Certificate(ca.cert);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${cn}`,
    issuer: caCert.subject,
    notBefore: new Date(now.getTime() - 60_000),
    notAfter: new Date(now.getTime() + days * 86_400_000),
    signingAlgorithm: ALG,
    publicKey: keys.publicKey,
    signingKey: await importKey(ca.key),
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension([
        ...dns.map((d) => ({ type: 'dns' as const, value: d })),
        ...ips.map((i) => ({ type: 'ip' as const, value: i })),
      ]),
    ],
  });
  return { cert: cert.toString('pem'), key: await exportKey(keys.privateKey) };
}

export function notAfter(pem: string): Date {
  return new x509.X509Certificate(pem).notAfter;
}

/** The PEM certificates in a bundle, in order. */
export function splitBundle(bundle: string): string[] {
  return bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
}
